package httpx

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/llm"
)

func TestParseError(t *testing.T) {
	tests := []struct {
		body, msg, code string
		kind            error
	}{
		{`{"error":{"message":"boom","type":"server_error","code":500}}`, "boom", "500", llm.ErrServer},
		{`{"error":{"message":"nope","code":"model_not_found"}}`, "nope", "model_not_found", llm.ErrModelNotFound},
		{`{"error":"model \"x\" not found"}`, `model "x" not found`, "", llm.ErrServer},
		{`{"error":null,"choices":[]}`, "", "", nil},
		{`{"error":[1,2]}`, "[1,2]", "", llm.ErrServer},
		{`not json`, "", "", nil},
	}
	for _, tt := range tests {
		e := ParseError([]byte(tt.body))
		if tt.kind == nil {
			if e != nil {
				t.Errorf("%s: %+v", tt.body, e)
			}
			continue
		}
		if e == nil || e.Message != tt.msg || e.Code != tt.code || !errors.Is(e, tt.kind) {
			t.Errorf("%s: %+v", tt.body, e)
		}
	}
}

func TestAPIErrorStatus(t *testing.T) {
	tests := []struct {
		status int
		body   string
		kind   error
	}{
		{401, `{"error":{"message":"bad key"}}`, llm.ErrAuth},
		{403, ``, llm.ErrAuth},
		{404, `{"error":"model 'x' not found"}`, llm.ErrModelNotFound},
		{404, `404 page not found`, llm.ErrServer},
		{503, `Loading model`, llm.ErrServer},
	}
	for _, tt := range tests {
		resp := &http.Response{StatusCode: tt.status, Body: io.NopCloser(strings.NewReader(tt.body))}
		e := APIError(resp)
		if !errors.Is(e, tt.kind) || e.Status != tt.status || e.Message == "" {
			t.Errorf("%d %q: %+v", tt.status, tt.body, e)
		}
	}
}

func TestDoRetriesDialErrorsOnly(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	c := NewClient(time.Second, time.Second)
	n := 0
	_, err := Do(context.Background(), c, func() (*http.Request, error) {
		n++
		return http.NewRequest("GET", "http://"+addr, nil)
	}, 2, time.Millisecond, nil)
	if !errors.Is(err, llm.ErrUnreachable) || n != 3 {
		t.Errorf("err %v after %d attempts", err, n)
	}
	if !IsDialError(&net.OpError{Op: "dial", Err: errors.New("refused")}) || IsDialError(io.ErrUnexpectedEOF) {
		t.Error("IsDialError")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Do(ctx, c, func() (*http.Request, error) { return http.NewRequestWithContext(ctx, "GET", "http://"+addr, nil) }, 5, time.Hour, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func FuzzParseError(f *testing.F) {
	f.Add(`{"error":{"message":"x","code":1}}`)
	f.Add(`{"error":"x"}`)
	f.Fuzz(func(t *testing.T, s string) {
		if e := ParseError([]byte(s)); e != nil && e.Kind == nil {
			t.Fatalf("no kind: %+v", e)
		}
	})
}
