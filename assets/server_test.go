package assets

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultServer serves files with Range support and injectable faults.
type faultServer struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte

	// Faults (guarded by mu; counters count down per response).
	noRange      bool           // answer every request 200 with the whole file
	noRangeParts bool           // honour Range only for bytes=0-0 (the probe)
	drops        int            // responses cut after dropAfter bytes
	dropAfter    int64          //
	stalls       int            // responses that stall after stallAfter bytes until the client gives up
	stallAfter   int64          //
	r416         int            // ranged requests (start > 0) answered 416
	status       map[string]int // fixed status per path
	busy         int            // responses answered 503 with Retry-After: 0
	corrupt      bool           // flip a byte in every body
	hf           bool           // serve /resolve/ paths Hugging Face style: redirect with X-Linked-Etag
	throttle     time.Duration  // sleep between 32 KiB chunks

	served   atomic.Int64 // body bytes written
	requests []string     // "PATH RANGE"
	auths    []string     // "PATH AUTHORIZATION"
}

func newFaultServer(t testing.TB) *faultServer {
	fs := &faultServer{files: map[string][]byte{}, status: map[string]int{}}
	fs.Server = httptest.NewServer(http.HandlerFunc(fs.serve))
	t.Cleanup(fs.Close)
	return fs
}

func (fs *faultServer) add(path string, data []byte) string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.files[path] = data
	return fs.URL + path
}

func (fs *faultServer) set(f func(fs *faultServer)) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f(fs)
}

func (fs *faultServer) log() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]string(nil), fs.requests...)
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (fs *faultServer) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	fs.mu.Lock()
	fs.requests = append(fs.requests, path+" "+r.Header.Get("Range"))
	fs.auths = append(fs.auths, path+" "+r.Header.Get("Authorization"))
	if fs.hf && strings.Contains(path, "/resolve/") {
		data, ok := fs.files[strings.Replace(path, "/resolve/", "/cdn/", 1)]
		fs.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		// Hugging Face answers LFS files with a redirect carrying the sha256 and size.
		w.Header().Set("X-Linked-Etag", `"`+sha(data)+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(data)))
		w.Header().Set("X-Repo-Commit", "0123456789abcdef")
		http.Redirect(w, r, strings.Replace(path, "/resolve/", "/cdn/", 1), http.StatusFound)
		return
	}
	if fs.busy > 0 && r.Header.Get("Range") != "bytes=0-0" {
		fs.busy--
		fs.mu.Unlock()
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if st, ok := fs.status[path]; ok {
		fs.mu.Unlock()
		w.WriteHeader(st)
		return
	}
	data, ok := fs.files[path]
	if !ok {
		fs.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	if fs.corrupt {
		data = append([]byte(nil), data...)
		data[len(data)/2] ^= 0xff
	}
	start, end := int64(0), int64(len(data))-1
	ranged := false
	if rh := r.Header.Get("Range"); rh != "" && !fs.noRange && !(fs.noRangeParts && rh != "bytes=0-0") {
		spec := strings.TrimPrefix(rh, "bytes=")
		a, b, _ := strings.Cut(spec, "-")
		s, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			fs.mu.Unlock()
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if s > 0 && fs.r416 > 0 {
			fs.r416--
			fs.mu.Unlock()
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		if s >= int64(len(data)) {
			fs.mu.Unlock()
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		if b != "" {
			e, err := strconv.ParseInt(b, 10, 64)
			if err == nil && e < end {
				end = e
			}
		}
		start, ranged = s, true
	}
	body := data[start : end+1]
	drop, stall := int64(-1), int64(-1)
	if len(body) > 1 && fs.drops > 0 {
		fs.drops--
		drop = min(fs.dropAfter, int64(len(body)-1))
	} else if len(body) > 1 && fs.stalls > 0 {
		fs.stalls--
		stall = min(fs.stallAfter, int64(len(body)-1))
	}
	throttle := fs.throttle
	fs.mu.Unlock()

	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Etag", `"v1-`+strconv.Itoa(len(data))+`"`)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if ranged {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	if r.Method == http.MethodHead {
		return
	}
	limit := int64(len(body))
	if drop >= 0 {
		limit = drop
	}
	if stall >= 0 {
		limit = stall
	}
	fl := w.(http.Flusher)
	for off := int64(0); off < limit; {
		n := min(32<<10, limit-off)
		k, err := w.Write(body[off : off+n])
		fs.served.Add(int64(k))
		if err != nil {
			return
		}
		off += n
		if throttle > 0 {
			fl.Flush()
			select {
			case <-time.After(throttle):
			case <-r.Context().Done():
				return
			}
		}
	}
	fl.Flush()
	if drop >= 0 {
		panic(http.ErrAbortHandler) // cut the connection mid-body
	}
	if stall >= 0 {
		<-r.Context().Done() // send nothing more until the client gives up
	}
}
