package serve

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// latencyBuckets are the histogram bounds in seconds.
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

type histogram struct {
	counts []uint64 // per bucket (not cumulative), plus +Inf at the end
	sum    float64
	n      uint64
}

// Metrics collects the server's counters and renders them in Prometheus' text format.
// It is safe for concurrent use.
type Metrics struct {
	mu       sync.Mutex
	requests map[[2]string]uint64 // route, code
	latency  map[string]*histogram
	counters map[string]*atomic.Int64 // free-form counters: name{labels}
	hists    map[string]*histogram    // free-form latency histograms by metric name
	gauges   []func(w io.Writer)
}

func newMetrics() *Metrics {
	return &Metrics{requests: map[[2]string]uint64{}, latency: map[string]*histogram{}, counters: map[string]*atomic.Int64{}, hists: map[string]*histogram{}}
}

// Observe records one finished request.
func (m *Metrics) Observe(route string, code int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[[2]string{route, strconv.Itoa(code)}]++
	h := m.latency[route]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBuckets)+1)}
		m.latency[route] = h
	}
	s := d.Seconds()
	i := sort.SearchFloat64s(latencyBuckets, s)
	h.counts[i]++
	h.sum += s
	h.n++
}

// ObserveLatency records d in the histogram called name (seconds, the request buckets).
func (m *Metrics) ObserveLatency(name string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.hists[name]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBuckets)+1)}
		m.hists[name] = h
	}
	s := d.Seconds()
	h.counts[sort.SearchFloat64s(latencyBuckets, s)]++
	h.sum += s
	h.n++
}

// Counter returns the counter for a series name (with its labels, e.g.
// `parley_wyoming_events_total{type="transcribe"}`), creating it.
func (m *Metrics) Counter(series string) *atomic.Int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.counters[series]
	if c == nil {
		c = new(atomic.Int64)
		m.counters[series] = c
	}
	return c
}

// Gauge adds a function that writes gauge lines at scrape time.
func (m *Metrics) Gauge(f func(w io.Writer)) {
	m.mu.Lock()
	m.gauges = append(m.gauges, f)
	m.mu.Unlock()
}

func label(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return r.Replace(s)
}

// Write renders every metric.
func (m *Metrics) Write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Fprintln(w, "# HELP parley_http_requests_total HTTP requests by route and status code.")
	fmt.Fprintln(w, "# TYPE parley_http_requests_total counter")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		fmt.Fprintf(w, "parley_http_requests_total{route=\"%s\",code=\"%s\"} %d\n", label(k[0]), k[1], m.requests[k])
	}
	fmt.Fprintln(w, "# HELP parley_http_request_duration_seconds HTTP request latency by route.")
	fmt.Fprintln(w, "# TYPE parley_http_request_duration_seconds histogram")
	routes := make([]string, 0, len(m.latency))
	for r := range m.latency {
		routes = append(routes, r)
	}
	sort.Strings(routes)
	for _, r := range routes {
		h := m.latency[r]
		var cum uint64
		for i, b := range latencyBuckets {
			cum += h.counts[i]
			fmt.Fprintf(w, "parley_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %d\n", label(r), b, cum)
		}
		cum += h.counts[len(latencyBuckets)]
		fmt.Fprintf(w, "parley_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %d\n", label(r), cum)
		fmt.Fprintf(w, "parley_http_request_duration_seconds_sum{route=\"%s\"} %g\n", label(r), h.sum)
		fmt.Fprintf(w, "parley_http_request_duration_seconds_count{route=\"%s\"} %d\n", label(r), h.n)
	}
	hnames := make([]string, 0, len(m.hists))
	for n := range m.hists {
		hnames = append(hnames, n)
	}
	sort.Strings(hnames)
	for _, n := range hnames {
		h := m.hists[n]
		fmt.Fprintf(w, "# TYPE %s histogram\n", n)
		var cum uint64
		for i, b := range latencyBuckets {
			cum += h.counts[i]
			fmt.Fprintf(w, "%s_bucket{le=\"%g\"} %d\n", n, b, cum)
		}
		cum += h.counts[len(latencyBuckets)]
		fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", n, cum, n, h.sum, n, h.n)
	}
	names := make([]string, 0, len(m.counters))
	for n := range m.counters {
		names = append(names, n)
	}
	sort.Strings(names)
	typed := map[string]bool{}
	for _, n := range names {
		base, _, _ := strings.Cut(n, "{")
		if !typed[base] {
			typed[base] = true
			fmt.Fprintf(w, "# TYPE %s counter\n", base)
		}
		fmt.Fprintf(w, "%s %d\n", n, m.counters[n].Load())
	}
	for _, g := range m.gauges {
		g(w)
	}
}

func (m *Metrics) limiterGauges(ls ...*Limiter) {
	m.Gauge(func(w io.Writer) {
		fmt.Fprintln(w, "# HELP parley_queue_depth Jobs waiting for an engine.")
		fmt.Fprintln(w, "# TYPE parley_queue_depth gauge")
		for _, l := range ls {
			fmt.Fprintf(w, "parley_queue_depth{engine=\"%s\"} %d\n", l.name, l.Waiting())
		}
		fmt.Fprintln(w, "# TYPE parley_queue_capacity gauge")
		for _, l := range ls {
			fmt.Fprintf(w, "parley_queue_capacity{engine=\"%s\"} %d\n", l.name, l.QueueCap())
		}
		fmt.Fprintln(w, "# HELP parley_engine_busy Jobs running on an engine.")
		fmt.Fprintln(w, "# TYPE parley_engine_busy gauge")
		for _, l := range ls {
			fmt.Fprintf(w, "parley_engine_busy{engine=\"%s\"} %d\n", l.name, l.Running())
		}
		fmt.Fprintln(w, "# HELP parley_queue_work_seconds Estimated work queued and running on an engine, in seconds.")
		fmt.Fprintln(w, "# TYPE parley_queue_work_seconds gauge")
		for _, l := range ls {
			fmt.Fprintf(w, "parley_queue_work_seconds{engine=\"%s\"} %s\n", l.name, num(l.WorkSeconds()))
		}
		fmt.Fprintln(w, "# HELP parley_rejected_total Jobs refused with 429 because the queue was full.")
		fmt.Fprintln(w, "# TYPE parley_rejected_total counter")
		for _, l := range ls {
			fmt.Fprintf(w, "parley_rejected_total{engine=\"%s\"} %d\n", l.name, l.Rejected())
		}
	})
}

// statusWriter records the status code of a response. It keeps http.ResponseController
// working (Unwrap) and passes Flush and Hijack through.
type statusWriter struct {
	http.ResponseWriter
	code    int
	written bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.written {
		s.code, s.written = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if !s.written {
		s.code, s.written = http.StatusOK, true
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
