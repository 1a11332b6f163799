package httpx

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
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

func TestNewConnDefaults(t *testing.T) {
	c := NewConn(Options{}, 7*time.Second)
	if c.Retries != 2 || c.Backoff != 250*time.Millisecond || c.Stall != 60*time.Second || c.Log == nil {
		t.Errorf("defaults: %+v", c)
	}
	tr := c.HC.Transport.(*http.Transport)
	if tr.ResponseHeaderTimeout != 7*time.Second {
		t.Errorf("header timeout %s, want the backend's 7s", tr.ResponseHeaderTimeout)
	}
	hc := &http.Client{}
	c = NewConn(Options{Retries: -1, StallTimeout: -1, Backoff: time.Second, HeaderTimeout: time.Minute, HTTPClient: hc}, 7*time.Second)
	if c.Retries != 0 || c.Stall != -1 || c.Backoff != time.Second || c.HC != hc {
		t.Errorf("explicit: %+v", c)
	}
	c = NewConn(Options{Retries: 5, ConnectTimeout: time.Second, HeaderTimeout: time.Minute}, 7*time.Second)
	if c.Retries != 5 || c.HC.Transport.(*http.Transport).ResponseHeaderTimeout != time.Minute {
		t.Errorf("explicit: %+v", c)
	}
}

// refusedAddr is a loopback address where nothing listens.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestBackoffDoubles(t *testing.T) {
	var waits []time.Duration
	after = func(d time.Duration) <-chan time.Time {
		waits = append(waits, d)
		ch := make(chan time.Time, 1)
		ch <- time.Time{}
		return ch
	}
	defer func() { after = time.After }()
	addr := refusedAddr(t)
	for _, tt := range []struct {
		o    Options
		want []time.Duration
	}{
		{Options{}, []time.Duration{250 * time.Millisecond, 500 * time.Millisecond}},
		{Options{Retries: 3, Backoff: time.Second}, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{Options{Retries: -1}, nil},
	} {
		waits = nil
		n := 0
		_, err := NewConn(tt.o, time.Second).Do(context.Background(), func() (*http.Request, error) {
			n++
			return http.NewRequest("GET", "http://"+addr, nil)
		})
		if !errors.Is(err, llm.ErrUnreachable) || !strings.Contains(err.Error(), addr) {
			t.Errorf("%+v: err %v", tt.o, err)
		}
		if n != len(tt.want)+1 || !slices.Equal(waits, tt.want) {
			t.Errorf("%+v: %d attempts, waits %v; want %d, %v", tt.o, n, waits, len(tt.want)+1, tt.want)
		}
	}
	// Do with no back-off of its own takes the default.
	waits = nil
	Do(context.Background(), NewClient(time.Second, time.Second), func() (*http.Request, error) {
		return http.NewRequest("GET", "http://"+addr, nil)
	}, 1, 0, nil)
	if !slices.Equal(waits, []time.Duration{DefaultBackoff}) {
		t.Errorf("Do's default back-off: %v", waits)
	}
}

// Cancelling during a back-off ends the wait at once with the context's cause.
func TestBackoffCancelled(t *testing.T) {
	addr := refusedAddr(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stop")
	time.AfterFunc(20*time.Millisecond, func() { cancel(stop) })
	start := time.Now()
	_, err := NewConn(Options{Retries: 3, Backoff: time.Hour}, time.Second).Do(ctx, func() (*http.Request, error) {
		return http.NewRequestWithContext(ctx, "GET", "http://"+addr, nil)
	})
	if !errors.Is(err, stop) || time.Since(start) > 10*time.Second {
		t.Errorf("err %v after %s", err, time.Since(start))
	}
}

// No HTTP status is retried, whatever it says: the server may have started a generation.
// (llm/openai adapts a 400 that names a parameter and sends again; that is its own.)
func TestNoRetryOnStatus(t *testing.T) {
	for _, status := range []int{200, 400, 401, 404, 408, 429, 500, 502, 503, 504} {
		hits := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits++
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(status)
		}))
		resp, err := NewConn(Options{Retries: 3, Backoff: time.Millisecond}, time.Second).Do(context.Background(), func() (*http.Request, error) {
			return http.NewRequest("GET", srv.URL, nil)
		})
		if err != nil || resp.StatusCode != status || hits != 1 {
			t.Errorf("%d: err %v, %d hits", status, err, hits)
		}
		if resp != nil {
			resp.Body.Close()
		}
		srv.Close()
	}
}

func TestServerURL(t *testing.T) {
	for _, tt := range []struct {
		in, full string
		ok, http bool
	}{
		{"127.0.0.1:8080", "http://127.0.0.1:8080", true, true},
		{"https://h/v1", "https://h/v1", true, true},
		{"ftp://x", "ftp://x", true, false},
		{"http://", "http://", false, false},
		{"", "http://", false, false},
		{"http://h:bad port", "http://h:bad port", false, false},
	} {
		full, u := ServerURL(tt.in)
		if full != tt.full || (u != nil) != tt.ok {
			t.Errorf("ServerURL(%q) = %q, %v", tt.in, full, u)
		}
		full, u = BackendURL(tt.in)
		if full != tt.full || (u != nil) != tt.http {
			t.Errorf("BackendURL(%q) = %q, %v", tt.in, full, u)
		}
	}
}
