package assets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Download errors.
var (
	ErrNotFound   = errors.New("not found on the server")
	ErrForbidden  = errors.New("access denied by the server")
	ErrChecksum   = errors.New("checksum mismatch")
	ErrNoSpace    = errors.New("not enough disk space")
	ErrStalled    = errors.New("transfer stalled")
	ErrWrongSize  = errors.New("wrong size")
	errNoRange    = errors.New("server ignored the Range header")
	errRangeGone  = errors.New("server answered 416 Range Not Satisfiable")
	errBadContent = errors.New("server sent an unexpected Content-Range")
)

// HTTPError is an unexpected HTTP status.
type HTTPError struct {
	URL        string
	Status     int
	RetryAfter time.Duration // from a 429/503 Retry-After header (seconds form), capped at 1 min
}

func newHTTPError(url string, resp *http.Response) *HTTPError {
	e := &HTTPError{URL: url, Status: resp.StatusCode}
	if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s > 0 {
		e.RetryAfter = min(time.Duration(s)*time.Second, time.Minute)
	}
	return e
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("%s: HTTP %d %s", e.URL, e.Status, http.StatusText(e.Status))
}

// Unwrap maps 404/410 to ErrNotFound and 401/403 to ErrForbidden.
func (e *HTTPError) Unwrap() error {
	switch e.Status {
	case http.StatusNotFound, http.StatusGone:
		return ErrNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		return ErrForbidden
	}
	return nil
}

// permanent reports an HTTP status that retrying the same URL will not fix.
func (e *HTTPError) permanent() bool {
	return e.Status >= 400 && e.Status < 500 && e.Status != http.StatusRequestTimeout && e.Status != http.StatusTooManyRequests
}

// WriteFile is the part of *os.File the downloader writes through (injectable for tests).
type WriteFile interface {
	io.WriterAt
	io.ReaderAt
	Truncate(size int64) error
	Sync() error
	Close() error
	Stat() (os.FileInfo, error)
}

func openFileRW(name string) (WriteFile, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
}

// want is what the registry says about a file.
type want struct {
	Size   int64
	SHA256 string
}

// fetchResult describes a downloaded, verified and installed file.
type fetchResult struct {
	Size       int64
	SHA256     string
	HashSource string // "pinned", "server" or "download"
	URL        string
}

// probeInfo is what the server says about a file before the transfer.
type probeInfo struct {
	Total     int64 // -1 when unknown
	Ranges    bool
	ETag      string
	ServerSHA string // sha256 the server publishes (Hugging Face X-Linked-Etag), or ""
}

// sidecar is the resume record kept next to the .partial file.
type sidecar struct {
	URL       string    `json:"url"`
	Total     int64     `json:"total"`
	ETag      string    `json:"etag,omitempty"`
	ServerSHA string    `json:"server_sha256,omitempty"`
	Ranges    bool      `json:"ranges"`
	Parts     []part    `json:"parts"`
	Updated   time.Time `json:"updated"`
}

type part struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"` // exclusive; -1 when the total is unknown
	Done  int64 `json:"done"`
}

func (p part) complete() bool { return p.End >= 0 && p.Start+p.Done >= p.End }

func (s *sidecar) matches(info probeInfo) bool {
	if s.Total != info.Total || s.Total < 0 {
		return false
	}
	if s.ServerSHA != "" && info.ServerSHA != "" {
		// The published content hash identifies the file; CDN ETags may differ per edge.
		if s.ServerSHA != info.ServerSHA {
			return false
		}
	} else if s.ETag != "" && info.ETag != "" && s.ETag != info.ETag {
		return false
	}
	// The parts must tile [0, Total) in order (a damaged record must not leave gaps).
	next := int64(0)
	for _, p := range s.Parts {
		if p.Start != next || p.Done < 0 || p.End < p.Start || p.End > s.Total || p.Start+p.Done > p.End {
			return false
		}
		next = p.End
	}
	return len(s.Parts) > 0 && len(s.Parts) <= maxParts && next == s.Total
}

// maxParts bounds the parts of one download (and what a resume record may ask for).
const maxParts = 64

func (s *sidecar) done() int64 {
	var n int64
	for _, p := range s.Parts {
		n += p.Done
	}
	return n
}

func loadSidecar(path string) *sidecar {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var s sidecar
	if json.Unmarshal(data, &s) != nil {
		return nil
	}
	return &s
}

func saveJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	// Synced before the rename, so a crash leaves the old record or the new one, never an
	// empty file that would forget the recorded hashes.
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// planParts splits a download into ranged parts.
func (m *Manager) planParts(info probeInfo) []part {
	if !info.Ranges || info.Total <= 0 {
		return []part{{Start: 0, End: info.Total}}
	}
	// Many chunks, fetched in order by Parts workers: the downloaded prefix then grows steadily,
	// so hashing along the transfer keeps up and little is left to hash at the end.
	n := int(max(1, min((info.Total+m.opts.MinPartSize-1)/m.opts.MinPartSize, maxParts)))
	size := (info.Total + int64(n) - 1) / int64(n)
	var parts []part
	for start := int64(0); start < info.Total; start += size {
		parts = append(parts, part{Start: start, End: min(start+size, info.Total)})
	}
	return parts
}

// serverHash extracts a published sha256 from response headers: Hugging Face sends it as
// X-Linked-Etag on the redirect for LFS files, and as the ETag of its own resolve answers.
func serverHash(h http.Header) string {
	clean := func(v string) string {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		return strings.ToLower(strings.Trim(v, `"`))
	}
	if v := clean(h.Get("X-Linked-Etag")); isSHA256(v) {
		return v
	}
	if h.Get("X-Repo-Commit") != "" {
		if v := clean(h.Get("Etag")); isSHA256(v) {
			return v
		}
	}
	return ""
}

// client returns an HTTP client that records the headers of redirect hops into hops.
func (m *Manager) client(hops *[]http.Header, mu *sync.Mutex) *http.Client {
	c := *m.opts.Client
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if req.Response != nil {
			mu.Lock()
			*hops = append(*hops, req.Response.Header)
			mu.Unlock()
		}
		return nil
	}
	return &c
}

// probe asks for the first byte to learn the size, Range support and published hash.
func (m *Manager) probe(ctx context.Context, url string) (probeInfo, error) {
	var hops []http.Header
	var mu sync.Mutex
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return probeInfo{}, err
	}
	req.Header.Set("Range", "bytes=0-0")
	req.Header.Set("User-Agent", userAgent)
	m.authorize(req)
	resp, err := m.client(&hops, &mu).Do(req)
	if err != nil {
		return probeInfo{}, err
	}
	defer resp.Body.Close()
	info := probeInfo{Total: -1, ETag: resp.Header.Get("Etag")}
	for _, h := range append(hops, resp.Header) {
		if s := serverHash(h); s != "" {
			info.ServerSHA = s
		}
		if n, err := strconv.ParseInt(h.Get("X-Linked-Size"), 10, 64); err == nil && n >= 0 {
			info.Total = n
		}
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
		_, _, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil {
			return info, fmt.Errorf("%s: %w: %v", url, errBadContent, err)
		}
		info.Ranges = true
		if total >= 0 {
			info.Total = total
		}
	case http.StatusOK:
		if resp.ContentLength >= 0 {
			info.Total = resp.ContentLength
		}
	case http.StatusRequestedRangeNotSatisfiable:
		// bytes=0-0 of an empty file.
		cr := resp.Header.Get("Content-Range")
		if strings.TrimSpace(cr) == "bytes */0" {
			info.Total, info.Ranges = 0, true
			return info, nil
		}
		return info, fmt.Errorf("%s: %w (Content-Range %q)", url, errRangeGone, cr)
	default:
		return info, newHTTPError(url, resp)
	}
	return info, nil
}

// parseContentRange parses "bytes START-END/TOTAL" (TOTAL may be *).
func parseContentRange(v string) (start, end, total int64, err error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(v), "bytes ")
	if !ok {
		return 0, 0, 0, fmt.Errorf("bad Content-Range %q", v)
	}
	rng, tot, ok := strings.Cut(rest, "/")
	a, b, ok2 := strings.Cut(rng, "-")
	if !ok || !ok2 {
		return 0, 0, 0, fmt.Errorf("bad Content-Range %q", v)
	}
	if start, err = strconv.ParseInt(a, 10, 64); err != nil || start < 0 {
		return 0, 0, 0, fmt.Errorf("bad Content-Range %q", v)
	}
	if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
		return 0, 0, 0, fmt.Errorf("bad Content-Range %q", v)
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total <= end {
			return 0, 0, 0, fmt.Errorf("bad Content-Range %q", v)
		}
	}
	return start, end, total, nil
}

const userAgent = "parley-model-manager/1"

// authorize adds $HF_TOKEN as a bearer token to requests for the Hugging Face endpoint (gated
// repositories). Go drops the header when a redirect leaves that host (the CDN).
func (m *Manager) authorize(req *http.Request) {
	tok := m.opts.Getenv("HF_TOKEN")
	if tok == "" {
		return
	}
	base := strings.TrimRight(m.opts.Getenv("HF_ENDPOINT"), "/")
	if base == "" {
		base = "https://huggingface.co"
	}
	if strings.HasPrefix(req.URL.String(), base+"/") {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
}

// unreachable reports a failure to reach the host at all (DNS, connection refused, no route):
// the probe does not retry it, and the rest of the pull skips that host.
func unreachable(err error) bool {
	var dns *net.DNSError
	var op *net.OpError
	return errors.As(err, &dns) || errors.As(err, &op) && op.Op == "dial"
}

// deadHosts remembers the hosts found unreachable during one pull.
type deadHosts struct {
	mu    sync.Mutex
	hosts map[string]error
}

type deadHostsKey struct{}

func withDeadHosts(ctx context.Context) context.Context {
	if ctx.Value(deadHostsKey{}) != nil {
		return ctx
	}
	return context.WithValue(ctx, deadHostsKey{}, &deadHosts{hosts: map[string]error{}})
}

func hostOf(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		return u.Host
	}
	return ""
}

// deadHost returns the error that made the URL's host unreachable earlier in this pull.
func deadHost(ctx context.Context, rawURL string) error {
	d, _ := ctx.Value(deadHostsKey{}).(*deadHosts)
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hosts[hostOf(rawURL)]
}

func markDead(ctx context.Context, rawURL string, err error) {
	// Keep the network-level cause ("lookup host: no such host"), not the first URL's wrapper.
	var dns *net.DNSError
	var op *net.OpError
	if errors.As(err, &dns) {
		err = dns
	} else if errors.As(err, &op) {
		err = op
	}
	if d, _ := ctx.Value(deadHostsKey{}).(*deadHosts); d != nil {
		d.mu.Lock()
		d.hosts[hostOf(rawURL)] = err
		d.mu.Unlock()
	}
}

// retryable reports whether another attempt at the same URL may succeed.
func retryable(err error) bool {
	var he *HTTPError
	switch {
	case errors.As(err, &he):
		return !he.permanent()
	case errors.Is(err, ErrNoSpace), errors.Is(err, ErrChecksum), errors.Is(err, ErrWrongSize),
		errors.Is(err, errNoRange), errors.Is(err, errRangeGone), errors.Is(err, errWriteFailed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return true
}

var errWriteFailed = errors.New("write failed")

// fatal reports errors that no other mirror can fix.
func fatal(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, ErrNoSpace) || errors.Is(err, errWriteFailed)
}

func (m *Manager) backoff(ctx context.Context, attempt int, cause error) error {
	d := m.opts.Backoff << min(attempt-1, 10)
	d = min(d, 30*time.Second)
	d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
	var he *HTTPError
	if errors.As(cause, &he) && he.RetryAfter > d {
		d = he.RetryAfter
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// probeRetry probes with retries for transient failures. A host that cannot be reached at
// all is not retried, and the rest of the pull skips it.
func (m *Manager) probeRetry(ctx context.Context, url string) (probeInfo, error) {
	if err := deadHost(ctx, url); err != nil {
		return probeInfo{}, fmt.Errorf("%s: skipped, its host was unreachable earlier in this pull: %w", url, err)
	}
	for attempt := 1; ; attempt++ {
		info, err := m.probe(ctx, url)
		if err == nil {
			return info, nil
		}
		if ctx.Err() != nil {
			return info, ctx.Err()
		}
		if unreachable(err) {
			markDead(ctx, url, err)
			return info, err
		}
		if !retryable(err) || attempt > m.opts.Retries {
			return info, err
		}
		m.opts.Log.Debug("probe failed; retrying", "url", url, "attempt", attempt, "err", err)
		if err := m.backoff(ctx, attempt, err); err != nil {
			return info, err
		}
	}
}

// download fetches url into dest: dest.partial with a dest.partial.json resume record, parallel
// ranged parts when the server allows, then verification and an atomic rename.
func (m *Manager) download(ctx context.Context, ev Event, url, dest string, w want) (fetchResult, error) {
	for restart := 0; ; restart++ {
		res, err := m.downloadOnce(ctx, ev, url, dest, w)
		if errors.Is(err, errRangeGone) && restart == 0 {
			// The file changed on the server under our partial: start again from nothing.
			m.opts.Log.Warn("server no longer has the bytes we were resuming; starting over", "url", url)
			m.discardPartial(dest)
			continue
		}
		return res, err
	}
}

func (m *Manager) discardPartial(dest string) {
	os.Remove(dest + ".partial")
	os.Remove(dest + ".partial.json")
}

func (m *Manager) downloadOnce(ctx context.Context, ev Event, url, dest string, w want) (fetchResult, error) {
	partial, side := dest+".partial", dest+".partial.json"
	ev.Phase = "probe"
	m.emit(ev)
	info, err := m.probeRetry(ctx, url)
	if err != nil {
		return fetchResult{}, err
	}
	if w.Size > 0 && info.Total >= 0 && info.Total != w.Size {
		return fetchResult{}, fmt.Errorf("%s: %w: the server offers %d bytes, the registry expects %d", url, ErrWrongSize, info.Total, w.Size)
	}
	if w.SHA256 != "" && info.ServerSHA != "" && w.SHA256 != info.ServerSHA {
		return fetchResult{}, fmt.Errorf("%s: %w: the server publishes sha256 %s, the registry pins %s", url, ErrChecksum, info.ServerSHA, w.SHA256)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return fetchResult{}, fmt.Errorf("%w: %v", errWriteFailed, err)
	}
	sc := loadSidecar(side)
	if sc != nil {
		if st, err := os.Stat(partial); err != nil || !sc.matches(info) || st.Size() > sc.Total && sc.Total >= 0 {
			m.opts.Log.Info("discarding a partial download that does not match the server's file", "file", partial)
			sc = nil
		} else if !info.Ranges && sc.done() > 0 {
			m.opts.Log.Info("server does not support Range now; restarting the partial download", "file", partial)
			sc = nil
		}
	}
	if sc == nil {
		os.Remove(partial)
		sc = &sidecar{URL: url, Total: info.Total, ETag: info.ETag, ServerSHA: info.ServerSHA, Ranges: info.Ranges, Parts: m.planParts(info)}
	} else {
		sc.Ranges = info.Ranges
		m.opts.Log.Info("resuming download", "file", dest, "done", sc.done(), "total", sc.Total)
	}
	if info.Total >= 0 {
		need := uint64(info.Total - sc.done())
		if free, err := m.opts.FreeSpace(filepath.Dir(dest)); err == nil && free < need {
			return fetchResult{}, fmt.Errorf("%w for %s: it needs %s more, %s has %s free", ErrNoSpace, filepath.Base(dest), humanBytes(int64(need)), filepath.Dir(dest), humanBytes(int64(free)))
		}
	}
	f, err := m.opts.OpenFile(partial)
	if err != nil {
		return fetchResult{}, fmt.Errorf("%w: %v", errWriteFailed, err)
	}
	closed := false
	defer func() {
		if !closed {
			f.Close()
		}
	}()
	if err := saveJSONAtomic(side, sc); err != nil {
		return fetchResult{}, fmt.Errorf("%w: resume record %s: %v", errWriteFailed, side, err)
	}

	d := &transfer{m: m, url: url, f: f, sc: sc, side: side, ev: ev, limit: w.Size}
	d.done.Store(sc.done())
	err = d.run(ctx)
	if errors.Is(err, errNoRange) {
		// The probe said ranges work but a part request got the whole file: fall back to one
		// stream from the start.
		m.opts.Log.Warn("server ignored Range on a part request; falling back to a single stream", "url", url)
		d.mu.Lock()
		sc.Ranges = false
		sc.Parts = []part{{Start: 0, End: sc.Total}}
		d.mu.Unlock()
		d.done.Store(0)
		err = d.run(ctx)
	}
	if errors.Is(err, ErrWrongSize) {
		// More bytes than the registry's size: not the file we want, and nothing to resume.
		closed = true
		f.Close()
		m.discardPartial(dest)
		return fetchResult{}, err
	}
	if err != nil {
		d.save() // keep what we have for resume
		return fetchResult{}, err
	}
	total := sc.Parts[len(sc.Parts)-1].End
	if err := f.Sync(); err != nil {
		return fetchResult{}, fmt.Errorf("%w: %s: %v", errWriteFailed, partial, err)
	}
	if st, err := f.Stat(); err == nil && st.Size() != total {
		if err := f.Truncate(total); err != nil {
			return fetchResult{}, fmt.Errorf("%w: %s: %v", errWriteFailed, partial, err)
		}
	}
	closed = true
	if err := f.Close(); err != nil {
		return fetchResult{}, fmt.Errorf("%w: %s: %v", errWriteFailed, partial, err)
	}
	var pre *hashed
	if d.sum != "" && d.size == total {
		pre = &hashed{sum: d.sum, size: d.size}
	}
	if m.benchNoHash {
		pre = &hashed{sum: w.SHA256, size: total}
	}
	return m.verifyAndInstall(ctx, ev, partial, dest, total, w, info.ServerSHA, url, pre)
}

// hashed is a sha256 computed during the transfer.
type hashed struct {
	sum  string
	size int64
}

// verifyAndInstall hashes the partial file, checks it and renames it into place. A mismatch
// discards the partial.
func (m *Manager) verifyAndInstall(ctx context.Context, ev Event, partial, dest string, size int64, w want, serverSHA, url string, pre *hashed) (fetchResult, error) {
	var sum string
	var n int64
	if pre != nil {
		sum, n = pre.sum, pre.size
	} else {
		ev.Phase, ev.Done, ev.Total = "verify", 0, size
		m.emit(ev)
		var err error
		sum, n, err = hashFile(ctx, partial, func(done int64) {
			ev.Done = done
			m.emitThrottled(ev)
		})
		if err != nil {
			return fetchResult{}, err
		}
	}
	res := fetchResult{Size: n, SHA256: sum, URL: url, HashSource: "download"}
	check := func(wantSum, what string) error {
		if sum == wantSum {
			return nil
		}
		m.discardPartial(dest)
		return fmt.Errorf("%w for %s from %s: got sha256 %s, want %s (%s); the download is discarded", ErrChecksum, filepath.Base(dest), url, sum, wantSum, what)
	}
	switch {
	case w.SHA256 != "":
		if err := check(w.SHA256, "pinned in the registry"); err != nil {
			return res, err
		}
		res.HashSource = "pinned"
	case serverSHA != "":
		if err := check(serverSHA, "published by the server"); err != nil {
			return res, err
		}
		res.HashSource = "server"
	}
	if w.Size > 0 && n != w.Size {
		m.discardPartial(dest)
		return res, fmt.Errorf("%w for %s: got %d bytes, want %d; the download is discarded", ErrWrongSize, filepath.Base(dest), n, w.Size)
	}
	if err := os.Rename(partial, dest); err != nil {
		return res, fmt.Errorf("%w: installing %s: %v", errWriteFailed, dest, err)
	}
	syncDir(filepath.Dir(dest))
	os.Remove(dest + ".partial.json")
	ev.Phase, ev.Done, ev.Total = "installed", n, n
	m.emit(ev)
	return res, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// hashFile returns the sha256 and size of a file, stopping when ctx is cancelled.
func hashFile(ctx context.Context, path string, progress func(int64)) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return "", n, err
		}
		k, err := f.Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		if progress != nil && k > 0 {
			progress(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", n, fmt.Errorf("reading %s: %w", path, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// transfer runs the parts of one download.
type transfer struct {
	m    *Manager
	url  string
	f    WriteFile
	side string
	ev   Event
	// limit is the registry's size for the file (0: unknown); a body of unknown length that
	// runs past it is cut off instead of filling the disk.
	limit int64

	mu   sync.Mutex // guards sc
	sc   *sidecar
	done atomic.Int64

	notify chan struct{} // a part wrote bytes (for the hasher)
	sum    string        // sha256 of the whole file, when the hasher kept up to the end
	size   int64
}

// prefix is how many bytes from the start are downloaded without a gap, and whether that is
// the whole file.
func (d *transfer) prefix() (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var p int64
	for _, pt := range d.sc.Parts {
		if pt.Start != p {
			return p, false
		}
		p = pt.Start + pt.Done
		if !pt.complete() {
			return p, false
		}
	}
	return p, true
}

// hashAlong hashes the contiguous downloaded prefix while the parts run (reading it back from
// the page cache), so that little hashing is left when the last byte arrives. It records the
// sum only when it covered the whole file; stop ends it once the parts are finished.
func (d *transfer) hashAlong(ctx context.Context, stop <-chan struct{}) {
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var hashed int64
	stopping := false
	for {
		p, all := d.prefix()
		for hashed < p {
			k, err := d.f.ReadAt(buf[:min(int64(len(buf)), p-hashed)], hashed)
			h.Write(buf[:k])
			hashed += int64(k)
			if err != nil && !errors.Is(err, io.EOF) || k == 0 {
				return
			}
			if ctx.Err() != nil {
				return
			}
		}
		if all {
			d.sum, d.size = hex.EncodeToString(h.Sum(nil)), hashed
			return
		}
		if stopping {
			return
		}
		select {
		case <-d.notify:
		case <-stop:
			stopping = true
		case <-ctx.Done():
			return
		}
	}
}

func (d *transfer) snapshot() sidecar {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := *d.sc
	s.Parts = append([]part(nil), d.sc.Parts...)
	return s
}

// save makes the written bytes durable, then records them (so the record never claims bytes
// that a crash could lose).
func (d *transfer) save() {
	s := d.snapshot()
	if err := d.f.Sync(); err != nil {
		return
	}
	s.Updated = time.Now().UTC()
	saveJSONAtomic(d.side, &s)
}

func (d *transfer) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.notify = make(chan struct{}, 1) // before any worker can write to it
	d.sum = ""
	snap := d.snapshot()
	queue := make(chan int, len(snap.Parts))
	for i, p := range snap.Parts {
		if !p.complete() {
			queue <- i
		}
	}
	close(queue)
	workers := min(d.m.opts.Parts, len(queue))
	if !snap.Ranges {
		workers = min(workers, 1)
	}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range queue {
				if ctx.Err() != nil {
					return
				}
				if err := d.runPart(ctx, i); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	if !d.m.benchNoHash {
		bg.Add(1)
		go func() {
			defer bg.Done()
			d.hashAlong(ctx, stop)
		}()
	}
	go func() { // progress and periodic resume records
		defer bg.Done()
		tick := time.NewTicker(d.m.opts.ProgressInterval)
		defer tick.Stop()
		lastSave := time.Now()
		rate := newRateMeter(d.done.Load())
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				d.mu.Lock()
				total := d.sc.Total
				d.mu.Unlock()
				ev := d.ev
				ev.Phase, ev.Done, ev.Total = "download", d.done.Load(), total
				ev.Rate, ev.ETA = rate.update(now, ev.Done, ev.Total)
				d.m.emit(ev)
				if now.Sub(lastSave) >= time.Second {
					d.save()
					lastSave = now
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	close(errs)
	var first error
	for err := range errs {
		if first == nil || errors.Is(first, context.Canceled) && !errors.Is(err, context.Canceled) {
			first = err
		}
	}
	if first == nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		ev := d.ev
		ev.Phase, ev.Done, ev.Total = "download", d.done.Load(), d.done.Load()
		d.m.emit(ev)
	}
	return first
}

func (d *transfer) runPart(ctx context.Context, i int) error {
	fails := 0
	for {
		progressed, err := d.fetchPart(ctx, i)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retryable(err) {
			return err
		}
		if progressed {
			fails = 0
		}
		fails++
		if fails > d.m.opts.Retries {
			return fmt.Errorf("giving up on %s after %d attempts: %w", d.url, fails, err)
		}
		d.m.opts.Log.Info("download interrupted; retrying", "url", d.url, "part", i, "attempt", fails, "err", err)
		if err := d.m.backoff(ctx, fails, err); err != nil {
			return err
		}
	}
}

// fetchPart transfers the rest of part i once. It reports whether any bytes arrived.
func (d *transfer) fetchPart(ctx context.Context, i int) (progressed bool, err error) {
	d.mu.Lock()
	p := d.sc.Parts[i]
	ranges := d.sc.Ranges
	single := len(d.sc.Parts) == 1
	d.mu.Unlock()
	if p.complete() {
		return false, nil
	}
	off := p.Start + p.Done
	if !ranges && off > 0 {
		// No resume without Range: start the (single) part over.
		d.mu.Lock()
		d.sc.Parts[i].Done = 0
		d.mu.Unlock()
		d.done.Add(-p.Done)
		p.Done, off = 0, p.Start
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stalled atomic.Bool
	stall := time.AfterFunc(d.m.opts.StallTimeout, func() { stalled.Store(true); cancel() })
	defer stall.Stop()
	stallErr := func(err error) error {
		if stalled.Load() {
			return fmt.Errorf("%s: %w: no data for %s", d.url, ErrStalled, d.m.opts.StallTimeout)
		}
		return err
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("User-Agent", userAgent)
	d.m.authorize(req)
	if ranges && (off > 0 || !single || p.End < 0) {
		if p.End >= 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, p.End-1))
		} else {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
		}
	}
	var hops []http.Header
	var mu sync.Mutex
	resp, err := d.m.client(&hops, &mu).Do(req)
	if err != nil {
		return false, stallErr(err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, _, _, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || start != off {
			return false, fmt.Errorf("%s: %w: asked for bytes from %d, got %q", d.url, errNoRange, off, resp.Header.Get("Content-Range"))
		}
	case http.StatusOK:
		if off != 0 || !single {
			return false, fmt.Errorf("%s: %w (HTTP 200 to a request for bytes %d-)", d.url, errNoRange, off)
		}
	case http.StatusRequestedRangeNotSatisfiable:
		return false, fmt.Errorf("%s: %w for bytes %d-", d.url, errRangeGone, off)
	default:
		return false, newHTTPError(d.url, resp)
	}
	buf := make([]byte, 256<<10)
	for {
		k, rerr := resp.Body.Read(buf)
		if k > 0 {
			stall.Reset(d.m.opts.StallTimeout)
			if p.End >= 0 && off+int64(k) > p.End {
				k = int(p.End - off) // the server sent more than asked; ignore the rest
				rerr = io.EOF
			}
			if p.End < 0 && d.limit > 0 && off+int64(k) > d.limit {
				return progressed, fmt.Errorf("%s: %w: the server sent more than the %d bytes the registry expects", d.url, ErrWrongSize, d.limit)
			}
			if _, werr := d.f.WriteAt(buf[:k], off); werr != nil {
				if errors.Is(werr, syscall.ENOSPC) {
					return progressed, fmt.Errorf("%w: the disk filled up while writing %s (%v); the partial download is kept: free some space and pull again to resume, or remove it with `parley models rm`", ErrNoSpace, d.side[:len(d.side)-len(".json")], werr)
				}
				return progressed, fmt.Errorf("%w: %v", errWriteFailed, werr)
			}
			off += int64(k)
			progressed = true
			d.mu.Lock()
			d.sc.Parts[i].Done += int64(k)
			d.mu.Unlock()
			d.done.Add(int64(k))
			select {
			case d.notify <- struct{}{}:
			default:
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return progressed, stallErr(fmt.Errorf("%s: %w", d.url, rerr))
		}
	}
	if p.End >= 0 && off < p.End {
		return progressed, fmt.Errorf("%s: %w: connection closed at byte %d of %d", d.url, io.ErrUnexpectedEOF, off, p.End)
	}
	if p.End < 0 {
		d.mu.Lock()
		d.sc.Parts[i].End = off
		d.sc.Total = off
		d.mu.Unlock()
		select {
		case d.notify <- struct{}{}:
		default:
		}
	}
	return progressed, nil
}
