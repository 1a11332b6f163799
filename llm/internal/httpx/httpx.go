// Package httpx holds the HTTP plumbing the LLM backends share: a transport with connect and
// response-header timeouts, retries with back-off on connect errors only, a stall watchdog
// for streams, a line reader with a size cap and server error decoding.
package httpx

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/parley-voice/parley/llm"
)

// MaxLine caps one stream line (an SSE frame or an NDJSON object).
const MaxLine = 4 << 20

// NewClient returns an HTTP client whose dials give up after connect and whose responses must
// start within header (0: no limit). There is no overall timeout: streams may run long; the
// caller's context and the stall watchdog bound them.
func NewClient(connect, header time.Duration) *http.Client {
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ResponseHeaderTimeout: header,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     false,
	}
	return &http.Client{Transport: t}
}

// IsDialError reports whether err happened while connecting, before any byte of the request
// was sent, so that retrying cannot run a generation twice.
func IsDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// Do sends the request built by build, retrying up to retries times with doubling back-off
// when the connection cannot be made. A final connect failure wraps llm.ErrUnreachable.
func Do(ctx context.Context, c *http.Client, build func() (*http.Request, error), retries int, backoff time.Duration, log *slog.Logger) (*http.Response, error) {
	if backoff <= 0 {
		backoff = 200 * time.Millisecond
	}
	for attempt := 0; ; attempt++ {
		req, err := build()
		if err != nil {
			return nil, err
		}
		resp, err := c.Do(req)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if !IsDialError(err) {
			return nil, err
		}
		if attempt >= retries {
			return nil, fmt.Errorf("%w: %s: %w", llm.ErrUnreachable, req.URL.Host, err)
		}
		if log != nil {
			log.Debug("llm: connect failed, retrying", "url", req.URL.String(), "attempt", attempt+1, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// Watchdog cancels a stream that stays silent for longer than its duration.
type Watchdog struct {
	t *time.Timer
	d time.Duration
}

// NewWatchdog arms a watchdog that calls cancel(llm.ErrStalled) after d of silence; d <= 0
// disables it.
func NewWatchdog(d time.Duration, cancel context.CancelCauseFunc) *Watchdog {
	w := &Watchdog{d: d}
	if d > 0 {
		w.t = time.AfterFunc(d, func() { cancel(fmt.Errorf("%w: no data for %s", llm.ErrStalled, d)) })
	}
	return w
}

// Kick notes activity.
func (w *Watchdog) Kick() {
	if w.t != nil {
		w.t.Reset(w.d)
	}
}

// Stop disarms the watchdog.
func (w *Watchdog) Stop() {
	if w.t != nil {
		w.t.Stop()
	}
}

// ReadLines calls fn for every line of r (without the line ending) until EOF, an error from
// fn, or a read error. Lines longer than MaxLine are an llm.ErrBadStream.
func ReadLines(r io.Reader, fn func(line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	for sc.Scan() {
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%w: a line longer than %d bytes", llm.ErrBadStream, MaxLine)
		}
		return err
	}
	return nil
}

// LimitBody caps a whole (non-streamed) response body at MaxLine bytes; reading past that is
// an llm.ErrBadStream that says the reply was too large.
func LimitBody(r io.Reader) io.Reader { return &limitedBody{r: r, left: MaxLine} }

type limitedBody struct {
	r    io.Reader
	left int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, fmt.Errorf("%w: the reply is larger than %d bytes", llm.ErrBadStream, MaxLine)
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, fmt.Errorf("%w: the reply is larger than %d bytes", llm.ErrBadStream, MaxLine)
	}
	return n, err
}

// StreamError turns a read error into the error to report: the context's cause (cancellation
// or stall) when the request context ended, else a truncated-stream error.
func StreamError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var ae *llm.APIError
	if errors.Is(err, llm.ErrBadStream) || errors.As(err, &ae) {
		return err
	}
	return fmt.Errorf("%w: %w", llm.ErrTruncated, err)
}

// APIError decodes an error response (OpenAI {"error":{"message":…}}, Ollama {"error":"…"},
// or plain text) into an *llm.APIError with the right sentinel.
func APIError(resp *http.Response) *llm.APIError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := ParseError(body)
	if e == nil {
		e = &llm.APIError{Message: strings.TrimSpace(string(body))}
	}
	e.Status = resp.StatusCode
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	msg := strings.ToLower(e.Message + " " + e.Code)
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		e.Kind = llm.ErrAuth
	case e.Code == "model_not_found" || (resp.StatusCode == http.StatusNotFound && strings.Contains(msg, "model")):
		e.Kind = llm.ErrModelNotFound
	default:
		e.Kind = llm.ErrServer
	}
	return e
}

// ParseError decodes an error object from a JSON body or frame; nil if there is none.
func ParseError(b []byte) *llm.APIError {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	if len(v.Error) == 0 || string(v.Error) == "null" {
		return nil
	}
	e := &llm.APIError{Kind: llm.ErrServer}
	var s string
	if json.Unmarshal(v.Error, &s) == nil {
		e.Message = s
		return e
	}
	var o struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(v.Error, &o) != nil {
		e.Message = string(v.Error)
		return e
	}
	e.Message, e.Type = o.Message, o.Type
	if len(o.Code) > 0 && string(o.Code) != "null" {
		var cs string
		if json.Unmarshal(o.Code, &cs) == nil {
			e.Code = cs
		} else {
			e.Code = string(o.Code)
		}
	}
	if e.Code == "model_not_found" {
		e.Kind = llm.ErrModelNotFound
	}
	return e
}

// Excerpt shortens b for an error message.
func Excerpt(b []byte) string {
	const n = 120
	if len(b) > n {
		return fmt.Sprintf("%q…", b[:n])
	}
	return fmt.Sprintf("%q", b)
}
