package app

import (
	"errors"
	"testing"
	"time"
)

func recv(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("subscription closed")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return Event{}
}

// The loop starts in New, before anyone can subscribe: what it said then reaches the first
// subscriber (not later ones), levels excepted, in order and bounded.
func TestBusKeepsEarlyEventsForFirstSubscriber(t *testing.T) {
	var b bus
	b.publish(Event{Kind: EvLevel, Level: -20})
	b.publish(Event{Kind: EvError, Err: errors.New("device unplugged")})
	for i := 0; i < 2*maxEarly; i++ {
		b.publish(Event{Kind: EvState, State: Listening})
	}
	first, unsub := b.subscribe(0)
	defer unsub()
	if e := recv(t, first); e.Kind != EvError || e.Err.Error() != "device unplugged" {
		t.Fatalf("first early event %v %v, want the error", e.Kind, e.Err)
	}
	for i := 1; i < maxEarly; i++ {
		if e := recv(t, first); e.Kind != EvState {
			t.Fatalf("early event %d is %v", i, e.Kind)
		}
	}
	second, unsub2 := b.subscribe(0)
	defer unsub2()
	b.publish(Event{Kind: EvTurnDone})
	if e := recv(t, first); e.Kind != EvTurnDone {
		t.Fatalf("first subscriber after the early ones: %v (more than %d kept?)", e.Kind, maxEarly)
	}
	if e := recv(t, second); e.Kind != EvTurnDone {
		t.Fatalf("second subscriber got %v first, want only what came after it subscribed", e.Kind)
	}
}
