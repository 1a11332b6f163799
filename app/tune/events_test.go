package tune

import (
	"bufio"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParseEvent(t *testing.T) {
	ev, err := ParseEvent([]byte(`{"event": "train", "step": 120, "epoch": 0, "loss": 1.93, "eta_s": null, "path": "a b", "config": {"lr": 1}, "zero": false}`))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Event != "train" || ev.Int("step") != 120 || ev.Numbers["loss"] != 1.93 || ev.Strings["path"] != "a b" {
		t.Fatalf("%+v", ev)
	}
	if _, ok := ev.Numbers["eta_s"]; ok {
		t.Error("null eta_s must be absent, not 0")
	}
	for _, bad := range []string{"", "plain text", "{", `{"step": 1}`, `{"event": 3}`, `{"event": ""}`, `[1]`, `{"event":"x","loss":NaN}`} {
		if _, err := ParseEvent([]byte(bad)); !errors.Is(err, ErrBadEvent) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	big := `{"event": "train", "step": 1e300}`
	if ev, err := ParseEvent([]byte(big)); err != nil || ev.Int("step") != 0 {
		t.Errorf("huge step: %v %v", ev, err)
	}
}

func FuzzParseEvent(f *testing.F) {
	for _, s := range []string{
		`{"event": "start", "world_size": 2, "total_steps": 400, "step": 0}`,
		`{"event": "train", "step": 10, "loss": 1.5, "eta_s": 3.5}`,
		`{"event": "val", "step": 10, "cer": 0.2}`,
		`{"event": "checkpoint", "step": 10, "path": "/x/ckpt-00000010.pt"}`,
		`{"event": "resume", "step": 8}`,
		`{"event": "done", "step": 400, "checkpoint": "/x"}`,
		`{"event": "train", "step": -5, "loss": -1e308}`,
		`{not json`, "", `{"event": "train", "step": "7"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := ParseEvent(b)
		if err != nil {
			if !errors.Is(err, ErrBadEvent) {
				t.Fatalf("error %v does not wrap ErrBadEvent", err)
			}
			return
		}
		for k, v := range ev.Numbers {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%s = %v", k, v)
			}
		}
		var p Progress
		p.apply(ev)
		p.apply(ev)
		if len(p.Losses) > MaxLossPoints {
			t.Fatal("loss history over its bound")
		}
		if _, err := json.Marshal(p); err != nil {
			t.Fatalf("progress does not marshal: %v", err)
		}
	})
}

func TestLossHistoryBounded(t *testing.T) {
	var p Progress
	for s := 1; s <= 10000; s++ {
		p.apply(TrainerEvent{Event: "train", Numbers: map[string]float64{"step": float64(s), "loss": 1 / float64(s)}})
		if len(p.Losses) > MaxLossPoints {
			t.Fatalf("%d points at step %d", len(p.Losses), s)
		}
	}
	if len(p.Losses) < MaxLossPoints/2 || p.Losses[len(p.Losses)-1].Step != 10000 || p.Losses[0].Step != p.LossStride {
		t.Fatalf("history spans %d..%d in %d points", p.Losses[0].Step, p.Losses[len(p.Losses)-1].Step, len(p.Losses))
	}
	for i := 1; i < len(p.Losses)-1; i++ { // the last bucket may be partly filled
		if p.Losses[i].Step-p.Losses[i-1].Step != p.LossStride || p.Losses[i].Loss > p.Losses[i-1].Loss {
			t.Fatalf("history uneven at %d (stride %d): %v", i, p.LossStride, p.Losses[i-1:i+1])
		}
	}
	// the first point is the mean of the first stride's losses
	want := 0.0
	for s := 1; s <= p.LossStride; s++ {
		want += 1 / float64(s) / float64(p.LossStride)
	}
	if math.Abs(p.Losses[0].Loss-want) > 1e-9 {
		t.Fatalf("first point %v, want the mean %v", p.Losses[0].Loss, want)
	}
	// a resume from step 5000 drops the points after it (the trainer repeats those steps)
	p.apply(TrainerEvent{Event: "resume", Numbers: map[string]float64{"step": 5000}})
	if last := p.Losses[len(p.Losses)-1].Step; last > 5000 {
		t.Fatalf("points after the resume step kept: %d", last)
	}
}

func TestReadLineSkipsOverlong(t *testing.T) {
	in := "short\n" + strings.Repeat("x", 300000) + "\nnext\nlast"
	rd := bufio.NewReaderSize(strings.NewReader(in), 4096)
	var got []string
	for {
		l, err := readLine(rd, 1000)
		if len(l) > 0 || err == nil {
			got = append(got, string(l[:min(len(l), 10)]))
			if len(l) > 1000 {
				t.Fatalf("line of %d bytes", len(l))
			}
		}
		if err != nil {
			break
		}
	}
	if strings.Join(got, ",") != "short,xxxxxxxxxx,next,last" {
		t.Fatalf("%q", got)
	}
}
