package serve

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// writeRuntimeMetrics writes the Go runtime and process figures under the names the
// Prometheus Go client's default collectors use (go_*, process_*), so dashboards and alerts
// written for any Go service work unchanged.
func writeRuntimeMetrics(w io.Writer) {
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", name, help, name, name, num(v))
	}
	counter := func(name, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %s\n", name, help, name, name, num(v))
	}
	gauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	gauge("go_threads", "Number of OS threads created.", float64(threads))
	fmt.Fprintf(w, "# HELP go_info Information about the Go environment.\n# TYPE go_info gauge\ngo_info{version=%q} 1\n", runtime.Version())

	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	fmt.Fprintln(w, "# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.")
	fmt.Fprintln(w, "# TYPE go_gc_duration_seconds summary")
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		fmt.Fprintf(w, "go_gc_duration_seconds{quantile=%q} %s\n", q, num(gc.PauseQuantiles[i].Seconds()))
	}
	fmt.Fprintf(w, "go_gc_duration_seconds_sum %s\ngo_gc_duration_seconds_count %d\n", num(gc.PauseTotal.Seconds()), gc.NumGC)
	rm := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(rm)
	if rm[0].Value.Kind() == metrics.KindUint64 {
		gauge("go_gc_gogc_percent", "Heap size target percentage configured by the user, otherwise 100.", float64(rm[0].Value.Uint64()))
	}
	if rm[1].Value.Kind() == metrics.KindUint64 {
		gauge("go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64.", float64(rm[1].Value.Uint64()))
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	gauge("go_memstats_alloc_bytes", "Number of heap bytes allocated and currently in use.", float64(m.Alloc))
	counter("go_memstats_alloc_bytes_total", "Total number of heap bytes allocated, even if freed.", float64(m.TotalAlloc))
	gauge("go_memstats_sys_bytes", "Number of bytes obtained from system.", float64(m.Sys))
	counter("go_memstats_mallocs_total", "Total number of heap objects allocated.", float64(m.Mallocs))
	counter("go_memstats_frees_total", "Total number of heap objects frees.", float64(m.Frees))
	gauge("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use.", float64(m.HeapAlloc))
	gauge("go_memstats_heap_sys_bytes", "Number of heap bytes obtained from system.", float64(m.HeapSys))
	gauge("go_memstats_heap_idle_bytes", "Number of heap bytes waiting to be used.", float64(m.HeapIdle))
	gauge("go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use.", float64(m.HeapInuse))
	gauge("go_memstats_heap_released_bytes", "Number of heap bytes released to OS.", float64(m.HeapReleased))
	gauge("go_memstats_heap_objects", "Number of allocated objects.", float64(m.HeapObjects))
	gauge("go_memstats_stack_inuse_bytes", "Number of bytes in use by the stack allocator.", float64(m.StackInuse))
	gauge("go_memstats_stack_sys_bytes", "Number of bytes obtained from system for stack allocator.", float64(m.StackSys))
	gauge("go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place.", float64(m.NextGC))
	gauge("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", float64(m.LastGC)/1e9)

	p, err := readProc()
	if err != nil {
		return // not Linux: the process collector has nothing to read
	}
	counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", p.cpu)
	gauge("process_open_fds", "Number of open file descriptors.", float64(p.fds))
	gauge("process_max_fds", "Maximum number of open file descriptors.", float64(p.maxFDs))
	gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", float64(p.vsize))
	gauge("process_resident_memory_bytes", "Resident memory size in bytes.", float64(p.rss))
	gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", p.start)
	gauge("process_threads", "Number of OS threads in the process.", float64(p.threads))
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// procStats are the process collector's figures, from /proc (Linux).
type procStats struct {
	cpu, start  float64
	vsize, rss  int64
	fds, maxFDs int64
	threads     int64
}

// userHZ is the kernel's clock tick for /proc/*/stat times (100 on every Linux port Go
// supports; Prometheus' procfs assumes the same).
const userHZ = 100

func readProc() (procStats, error) {
	var p procStats
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return p, err
	}
	// the command name is in parentheses and may hold spaces: fields start after the last ')'
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return p, fmt.Errorf("malformed /proc/self/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return p, fmt.Errorf("malformed /proc/self/stat")
	}
	// f[0] is field 3 (state): field n is f[n-3]
	at := func(n int) int64 { v, _ := strconv.ParseInt(f[n-3], 10, 64); return v }
	p.cpu = float64(at(14)+at(15)) / userHZ
	p.threads = at(20)
	p.vsize = at(23)
	p.rss = at(24) * int64(os.Getpagesize())
	if st, err := os.ReadFile("/proc/stat"); err == nil {
		for _, line := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(line, "btime "); ok {
				bt, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				p.start = float64(bt) + float64(at(22))/userHZ
			}
		}
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		p.fds = int64(len(ents))
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		p.maxFDs = int64(rl.Cur)
	}
	return p, nil
}
