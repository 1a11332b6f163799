package serve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// spool holds an upload (or decoded audio) with bounded memory: the first memMax bytes in
// memory, the rest in a temporary file, which Close removes. Twelve 60 MB uploads cost
// twelve times memMax of memory, not twelve growing buffers.
type spool struct {
	memMax int
	dir    string
	mem    []byte
	f      *os.File
	n      int64
}

func newSpool(memMax int, dir string) *spool { return &spool{memMax: memMax, dir: dir} }

func (s *spool) Write(p []byte) (int, error) {
	if s.f == nil && len(s.mem)+len(p) <= s.memMax {
		if s.mem == nil {
			s.mem = make([]byte, 0, min(s.memMax, max(len(p), 32<<10)))
		}
		s.mem = append(s.mem, p...)
		s.n += int64(len(p))
		return len(p), nil
	}
	if s.f == nil {
		f, err := os.CreateTemp(s.dir, "parley-upload-*")
		if err != nil {
			return 0, fmt.Errorf("spooling the upload to disk: %w", err)
		}
		s.f = f
		if _, err := f.Write(s.mem); err != nil {
			return 0, fmt.Errorf("spooling the upload to disk: %w", err)
		}
		s.mem = nil
	}
	n, err := s.f.Write(p)
	s.n += int64(n)
	if err != nil {
		err = fmt.Errorf("spooling the upload to disk: %w", err)
	}
	return n, err
}

// Len is the number of bytes written.
func (s *spool) Len() int64 { return s.n }

// Bytes returns the content when it is all in memory.
func (s *spool) Bytes() ([]byte, bool) { return s.mem, s.f == nil }

// Reader reads the content from the start (one reader at a time).
func (s *spool) Reader() (io.Reader, error) {
	if s.f == nil {
		return bytes.NewReader(s.mem), nil
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return s.f, nil
}

// Path is the temporary file's name ("" while the content is in memory).
func (s *spool) Path() string {
	if s.f == nil {
		return ""
	}
	return s.f.Name()
}

// Close frees the memory and removes the file.
func (s *spool) Close() error {
	s.mem = nil
	if s.f == nil {
		return nil
	}
	name := s.f.Name()
	s.f.Close()
	s.f = nil
	return os.Remove(name)
}

// errSlowUpload is a body that arrived slower than the rate floor allows, or past the
// upload deadline: a slow client must not hold a place others need.
var errSlowUpload = errors.New("upload too slow")

// floorReader reads a request body under a rate floor: after a grace period the body must
// have arrived at minRate bytes a second on average, and all of it before deadline. It moves
// the connection's read deadline to the moment the floor would be broken, so a stalled
// client is dropped without a byte more.
type floorReader struct {
	r        io.Reader
	rc       *http.ResponseController
	start    time.Time
	grace    time.Duration
	minRate  float64
	deadline time.Time
	n        int64
	failed   bool
}

func newFloorReader(w http.ResponseWriter, r io.Reader, grace time.Duration, minRate float64, total time.Duration) *floorReader {
	now := time.Now()
	return &floorReader{r: r, rc: http.NewResponseController(w), start: now, grace: grace, minRate: minRate, deadline: now.Add(total)}
}

func (f *floorReader) Read(p []byte) (int, error) {
	if f.failed {
		return 0, errSlowUpload
	}
	d := f.deadline
	if f.minRate > 0 {
		// the floor is broken once elapsed > grace + n/minRate
		floor := f.start.Add(f.grace + time.Duration(float64(f.n)/f.minRate*float64(time.Second)))
		if floor.Before(d) {
			d = floor
		}
	}
	f.rc.SetReadDeadline(d)
	n, err := f.r.Read(p)
	f.n += int64(n)
	if err != nil && isTimeout(err) {
		f.failed = true
		return n, errSlowUpload
	}
	return n, err
}

// done clears the read deadline once the body is in.
func (f *floorReader) done() { f.rc.SetReadDeadline(time.Time{}) }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// uploadGate bounds the uploads being read (and decoded) at once, in all and per client
// address, so that slow or many clients cannot hold every place: reading happens before a
// job takes its queue place, and a client over its share is refused at once.
type uploadGate struct {
	mu        sync.Mutex
	max       int
	perClient int
	n         int
	by        map[string]int
}

func newUploadGate(max, perClient int) *uploadGate {
	return &uploadGate{max: max, perClient: perClient, by: map[string]int{}}
}

// enter takes a place for client, or reports false.
func (g *uploadGate) enter(client string) (leave func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n >= g.max || g.by[client] >= g.shareLocked(client) {
		return nil, false
	}
	g.n++
	g.by[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.n--
			if g.by[client]--; g.by[client] <= 0 {
				delete(g.by, client)
			}
			g.mu.Unlock()
		})
	}, true
}

// shareLocked is how many places client may hold: perClient, or more while few other
// clients hold any: the places left after keeping perClient for a newcomer, split evenly
// between the clients uploading. One address often speaks for many users (a reverse proxy,
// or Home Assistant and Open WebUI on one host): alone, it may use most of the places; when
// others come, each gets an even share again as its uploads end.
func (g *uploadGate) shareLocked(client string) int {
	others := len(g.by)
	if g.by[client] > 0 {
		others--
	}
	return max(g.perClient, (g.max-g.perClient)/(others+1))
}

func (g *uploadGate) active() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// clientHost is the client's address without its port.
func clientHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
