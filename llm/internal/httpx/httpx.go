// Package httpx holds the HTTP plumbing the LLM backends share: their connection defaults
// and server URL parsing, a transport with connect and response-header timeouts, retries
// with back-off on connect errors only, a stall watchdog for streams, a line reader with a
// size cap and server error decoding.
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
	"net/url"
	"strings"
	"time"

	"github.com/parley-voice/parley/llm"
)

// MaxLine caps one stream line (an SSE frame or an NDJSON object).
const MaxLine = 4 << 20

// The defaults both backends (llm/openai, llm/ollama) take for the zero values of their
// configs. The response-header timeout is each backend's own (see NewConn).
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultStallTimeout   = 60 * time.Second // longest silence inside a stream
	DefaultRetries        = 2                // extra attempts on connect errors
	DefaultBackoff        = 250 * time.Millisecond
)

// Options are a backend's connection settings as its Config spells them. Zero values take
// the defaults; StallTimeout < 0 disables the watchdog, Retries < 0 means no retry.
type Options struct {
	ConnectTimeout time.Duration
	HeaderTimeout  time.Duration
	StallTimeout   time.Duration
	Retries        int
	Backoff        time.Duration // first retry delay, doubling
	HTTPClient     *http.Client  // overrides ConnectTimeout and HeaderTimeout
	Log            *slog.Logger
}

// Conn is a backend's way to its server, defaults applied: the HTTP client, the retry
// policy for connect errors, and the stall watchdog's duration.
type Conn struct {
	HC      *http.Client
	Log     *slog.Logger // never nil
	Retries int          // >= 0
	Backoff time.Duration
	Stall   time.Duration // <= 0: no watchdog
}

// NewConn applies the defaults to o (header: the backend's default response-header timeout)
// and builds the HTTP client, unless o brings its own.
func NewConn(o Options, header time.Duration) *Conn {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = header
	}
	if o.StallTimeout == 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	} else if o.Retries < 0 {
		o.Retries = 0
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = NewClient(o.ConnectTimeout, o.HeaderTimeout)
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Conn{HC: hc, Log: log, Retries: o.Retries, Backoff: o.Backoff, Stall: o.StallTimeout}
}

// Do sends the request built by build with c's client and retry policy (see Do).
func (c *Conn) Do(ctx context.Context, build func() (*http.Request, error)) (*http.Response, error) {
	return Do(ctx, c.HC, build, c.Retries, c.Backoff, c.Log)
}

// Watchdog arms a stall watchdog of c's duration over a stream (see NewWatchdog).
func (c *Conn) Watchdog(cancel context.CancelCauseFunc) *Watchdog {
	return NewWatchdog(c.Stall, cancel)
}

// ServerURL reads a server URL as Parley's LLM settings accept it: "http://" is assumed when
// raw names no scheme. full is raw with that scheme; u is nil when full does not parse or
// names no host. raw is taken as it is (callers trim it).
func ServerURL(raw string) (full string, u *url.URL) {
	full = raw
	if !strings.Contains(full, "://") {
		full = "http://" + full
	}
	u, err := url.Parse(full)
	if err != nil || u.Host == "" {
		return full, nil
	}
	return full, u
}

// BackendURL is ServerURL for a backend's client: u is also nil unless the scheme is http or
// https.
func BackendURL(raw string) (full string, u *url.URL) {
	full, u = ServerURL(raw)
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") {
		return full, nil
	}
	return full, u
}

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

// after waits out a retry's back-off; tests replace it to see the delays.
var after = time.After

// Do sends the request built by build, retrying up to retries times with doubling back-off
// (backoff <= 0: DefaultBackoff) when the connection cannot be made. Any HTTP response, of
// whatever status, is returned as it is: the server may have started the work. A final
// connect failure wraps llm.ErrUnreachable.
func Do(ctx context.Context, c *http.Client, build func() (*http.Request, error), retries int, backoff time.Duration, log *slog.Logger) (*http.Response, error) {
	if backoff <= 0 {
		backoff = DefaultBackoff
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
		case <-after(backoff):
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
