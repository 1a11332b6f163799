package serve

// The load-and-abuse test: each denial of service and memory blow-up found by probing the
// server (issue 21) is reproduced against a real server process, and shown refused or
// bounded. The server runs as a child process (this test binary re-executed, see TestMain) so
// that its resident memory (VmRSS, VmHWM) and OS threads are measured alone, without the
// clients' buffers. The engines are fakes whose work is proportional to the audio they get,
// as a recogniser's is.
//
//	go test ./app/serve -run TestAbuse -v              (the quick variant, part of make test)
//	PARLEY_LOAD=full go test ./app/serve -run TestAbuse -v -timeout 30m   (make load: full scale)

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/serve/wyoming"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/gpu"
)

const childEnv = "PARLEY_SERVE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// workASR is a recogniser whose work is proportional to the audio it gets: rtf seconds of
// wall time per second of audio (at least minWork per call), as SenseVoice's is. It reads a
// stream in 1 s blocks, holding no more, as asr.Recognizer does.
type workASR struct {
	rtf     float64
	minWork time.Duration
	audio   atomic.Int64 // samples recognised
	busy    atomic.Int64 // nanoseconds of work done
	calls   atomic.Int64
}

func (w *workASR) Options() asr.Options { return asr.Options{Language: "auto"} }

func (w *workASR) work(ctx context.Context, samples int) error {
	d := time.Duration(float64(samples) / asr.SampleRate * w.rtf * float64(time.Second))
	w.audio.Add(int64(samples))
	w.busy.Add(int64(d))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *workASR) result(samples int) *asr.Result {
	d := float64(samples) / asr.SampleRate
	return &asr.Result{Text: "hello world", Lang: "en", Duration: d, Segments: []asr.Segment{{Start: 0, End: d, Text: "hello world"}}}
}

func (w *workASR) TranscribeWith(ctx context.Context, pcm []float32, o asr.Options) (*asr.Result, error) {
	w.calls.Add(1)
	if err := w.work(ctx, len(pcm)); err != nil {
		return nil, err
	}
	if w.minWork > 0 {
		time.Sleep(w.minWork)
	}
	return w.result(len(pcm)), nil
}

func (w *workASR) TranscribeStream(ctx context.Context, src asr.Source, o asr.Options, onSegment func(asr.Segment) error) (*asr.Result, error) {
	w.calls.Add(1)
	buf := make([]float32, asr.SampleRate)
	total := 0
	for {
		n, err := src.Read(ctx, buf)
		total += n
		if werr := w.work(ctx, n); werr != nil {
			return nil, werr
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if w.minWork > 0 {
		time.Sleep(w.minWork)
	}
	return w.result(total), nil
}

// childStats is what the child reports on its stats address.
type childStats struct {
	AudioSeconds float64 `json:"audio_seconds"` // recognised
	BusySeconds  float64 `json:"busy_seconds"`  // recogniser work
	Calls        int64   `json:"calls"`
	Goroutines   int     `json:"goroutines"`
	HeapInuse    uint64  `json:"heap_inuse"`
}

// runChild is the server process: fake engines behind the real Server, on loopback.
func runChild() int {
	rtf, _ := strconv.ParseFloat(os.Getenv("PARLEY_CHILD_RTF"), 64)
	if rtf == 0 {
		rtf = 0.01
	}
	w := &workASR{rtf: rtf, minWork: 20 * time.Millisecond}
	e := Engines{ASR: w, ASRModel: "work-asr", TTS: &fakeTTS{}, Brain: echoBrain{}}
	vadNote := "energy"
	if p := vad.DefaultModel(); os.Getenv("PARLEY_CHILD_SILERO") != "" && gpu.Init() == nil {
		if _, err := os.Stat(p); err == nil {
			vadNote = "silero"
			pool, err := factory.New(nil, nil).VADPool(runtime.GOMAXPROCS(0)) // as Load does
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer pool.Close()
			e.NewVAD = factory.SileroVADs(pool)
		}
	}
	o := Options{Config: config.Default().Serve, Engines: e, Version: "child"}
	o.Config.MaxUploadMB = 64
	o.Config.MaxConcurrentASR, o.Config.MaxConcurrentTTS = 2, 2
	if q, _ := strconv.Atoi(os.Getenv("PARLEY_CHILD_QUEUE")); q > 0 {
		o.QueueLen = q
	}
	if u, _ := strconv.Atoi(os.Getenv("PARLEY_CHILD_UPLOADS_PER_CLIENT")); u > 0 {
		o.MaxUploadsPerClient = u
	}
	s, err := New(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var ls Listeners
	for _, p := range []*net.Listener{&ls.HTTP, &ls.WyomingASR, &ls.WyomingTTS} {
		if *p, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	stats, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1
	}
	go http.Serve(stats, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		json.NewEncoder(rw).Encode(childStats{
			AudioSeconds: float64(w.audio.Load()) / asr.SampleRate, BusySeconds: time.Duration(w.busy.Load()).Seconds(),
			Calls: w.calls.Load(), Goroutines: runtime.NumGoroutine(), HeapInuse: ms.HeapInuse})
	}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }() // the parent closing stdin stops us
	fmt.Printf("READY http=%s asr=%s tts=%s stats=%s vad=%s\n", ls.HTTP.Addr(), ls.WyomingASR.Addr(), ls.WyomingTTS.Addr(), stats.Addr(), vadNote)
	if err := s.Serve(ctx, ls); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// child is a running server process.
type child struct {
	t                     *testing.T
	cmd                   *exec.Cmd
	stdin                 io.Closer
	base, asr, tts, stats string
	vad                   string
}

func startChild(t *testing.T, env ...string) *child {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("resident memory is read from /proc (Linux)")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, cmd: cmd, stdin: in}
	t.Cleanup(c.stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	for _, f := range strings.Fields(line)[1:] {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "http":
			c.base = "http://" + v
		case "asr":
			c.asr = v
		case "tts":
			c.tts = v
		case "stats":
			c.stats = "http://" + v
		case "vad":
			c.vad = v
		}
	}
	go io.Copy(io.Discard, out)
	return c
}

func (c *child) stop() {
	if c.cmd.ProcessState != nil {
		return
	}
	c.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(45 * time.Second):
		c.cmd.Process.Kill()
		<-done
		c.t.Error("server process did not stop in 45 s")
	}
}

// proc reads the child's memory and threads from /proc: VmRSS, VmHWM (peak) in bytes.
func (c *child) proc() (rss, peak int64, threads int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		c.t.Fatalf("reading the server's /proc status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			peak = n << 10
		case "Threads":
			threads = int(n)
		}
	}
	return
}

// resetPeak starts a new VmHWM measurement (clear_refs 5 resets the peak resident size).
func (c *child) resetPeak() {
	os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", c.cmd.Process.Pid), []byte("5"), 0)
}

func (c *child) childStats() childStats {
	var s childStats
	resp, err := http.Get(c.stats)
	if err != nil {
		c.t.Fatalf("stats: %v", err)
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&s)
	return s
}

// settle waits for the child's resident memory to stop falling (at most d) and returns it.
func (c *child) settle(d time.Duration) (rss int64, threads int) {
	deadline := time.Now().Add(d)
	rss, _, threads = c.proc()
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		r, _, th := c.proc()
		if r >= rss-1<<20 && time.Until(deadline) < d/2 {
			return r, th
		}
		rss, threads = r, th
	}
	return rss, threads
}

func mb(n int64) string { return fmt.Sprintf("%.0f MB", float64(n)/1e6) }

// figures collects the before/after numbers printed at the end.
type figures struct {
	mu    sync.Mutex
	lines []string
}

func (f *figures) add(t *testing.T, format string, a ...any) {
	t.Helper()
	s := fmt.Sprintf(format, a...)
	t.Log(s)
	f.mu.Lock()
	f.lines = append(f.lines, t.Name()+": "+s)
	f.mu.Unlock()
}

func fullLoad() bool { return os.Getenv("PARLEY_LOAD") == "full" }

// wavHeader is a 16-bit mono WAV header for dataBytes of samples at rate.
func wavHeader(rate, dataBytes int) []byte {
	h := make([]byte, 44)
	copy(h, "RIFF")
	binary.LittleEndian.PutUint32(h[4:], uint32(36+dataBytes))
	copy(h[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(h[16:], 16)
	binary.LittleEndian.PutUint16(h[20:], 1)
	binary.LittleEndian.PutUint16(h[22:], 1)
	binary.LittleEndian.PutUint32(h[24:], uint32(rate))
	binary.LittleEndian.PutUint32(h[28:], uint32(rate*2))
	binary.LittleEndian.PutUint16(h[32:], 2)
	binary.LittleEndian.PutUint16(h[34:], 16)
	copy(h[36:], "data")
	binary.LittleEndian.PutUint32(h[40:], uint32(dataBytes))
	return h
}

// toneReader streams a WAV of a quiet tone of n bytes of samples without holding it.
type toneReader struct {
	hdr []byte
	n   int // samples bytes left
	i   int
}

func newToneWAV(rate, dataBytes int) *toneReader {
	return &toneReader{hdr: wavHeader(rate, dataBytes), n: dataBytes}
}

func (r *toneReader) Read(p []byte) (int, error) {
	if len(r.hdr) > 0 {
		n := copy(p, r.hdr)
		r.hdr = r.hdr[n:]
		return n, nil
	}
	if r.n == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.n) &^ 1
	if n == 0 {
		n = min(len(p), r.n)
	}
	for j := 0; j+1 < n; j += 2 {
		v := int16(3000 * math.Sin(float64(r.i)*0.1))
		binary.LittleEndian.PutUint16(p[j:], uint16(v))
		r.i++
	}
	r.n -= n
	return n, nil
}

// multipartStream is a transcription form whose file part streams from file, with its
// length known (so the request carries Content-Length as the SDKs' do).
func multipartStream(file io.Reader, fileLen int, fields ...[2]string) (ctype string, body io.Reader, n int64) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	for _, f := range fields {
		mw.WriteField(f[0], f[1])
	}
	mw.CreateFormFile("file", "speech.wav")
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	return mw.FormDataContentType(), io.MultiReader(bytes.NewReader(head.Bytes()), file, strings.NewReader(tail)),
		int64(head.Len() + fileLen + len(tail))
}

func transcribe(ctx context.Context, client *http.Client, base string, file io.Reader, fileLen int) (status int, hdr http.Header, body []byte, err error) {
	ct, rd, n := multipartStream(file, fileLen, [2]string{"model", "whisper-1"})
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/audio/transcriptions", rd)
	req.Header.Set("Content-Type", ct)
	req.ContentLength = n
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, nil
}

func oneSecondWAV() []byte {
	var b bytes.Buffer
	io.Copy(&b, newToneWAV(16000, 32000))
	return b.Bytes()
}

var abuseFigures figures

// TestAbuse reproduces each attack of issue 21 against a server process.
func TestAbuse(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	t.Cleanup(func() {
		t.Log("figures:\n  " + strings.Join(abuseFigures.lines, "\n  "))
		if p := os.Getenv("PARLEY_LOAD_FIGURES"); p != "" {
			os.WriteFile(p, []byte(strings.Join(abuseFigures.lines, "\n")+"\n"), 0o644)
		}
	})
	t.Run("RateFloor", testAbuseRateFloor)
	t.Run("SlowUploads", testAbuseSlowUploads)
	t.Run("Burst", testAbuseBurst)
	t.Run("RetryAfter", testAbuseRetryAfter)
	t.Run("Uploads60MB", testAbuseBigUploads)
	t.Run("Realtime", testAbuseRealtime)
	t.Run("Wyoming", testAbuseWyoming)
}

// A 7 KB WAV that declares 1 Hz would be 3600 s of audio after resampling to 16 kHz: it is
// refused at once, and no recogniser work is spent on it.
func testAbuseRateFloor(t *testing.T) {
	c := startChild(t)
	data := make([]byte, 7200)
	for i := range data {
		data[i] = byte(i * 7)
	}
	file := append(wavHeader(1, len(data)), data...)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := time.Now()
	status, _, body, err := transcribe(ctx, http.DefaultClient, c.base, bytes.NewReader(file), len(file))
	took := time.Since(start)
	st := c.childStats()
	abuseFigures.add(t, "7 KB WAV at 1 Hz: status %d after %.2f s, recogniser work %.2f s for %.0f s of audio (%v)", status, took.Seconds(), st.BusySeconds, st.AudioSeconds, err)
	if err != nil || status != 400 {
		t.Errorf("status %d, err %v: %s", status, err, body)
	} else if _, _, _, code := apiErr(t, body); code == "" {
		t.Errorf("no code: %s", body)
	}
	if st.AudioSeconds > 0 || st.Calls > 0 {
		t.Errorf("the 1 Hz file reached the recogniser: %d calls, %.0f s of recognised audio", st.Calls, st.AudioSeconds)
	}
	// a low but real rate (8 kHz telephone audio) still works
	tel := append(wavHeader(8000, 16000), make([]byte, 16000)...)
	if status, _, body, err := transcribe(ctx, http.DefaultClient, c.base, bytes.NewReader(tel), len(tel)); err != nil || status != 200 {
		t.Errorf("8 kHz: %d %v %s", status, err, body)
	}
}

// Ten clients uploading at 1 byte/s do not keep others out: an ordinary transcription and a
// Wyoming utterance are answered meanwhile, and the slow uploads are cut.
func testAbuseSlowUploads(t *testing.T) {
	c := startChild(t)
	host := strings.TrimPrefix(c.base, "http://")
	var slow []net.Conn
	defer func() {
		for _, s := range slow {
			s.Close()
		}
	}()
	cut := make(chan time.Duration, 10)
	start := time.Now()
	for i := 0; i < 10; i++ {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		slow = append(slow, conn)
		fmt.Fprintf(conn, "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 1000000\r\n\r\n--b\r\n")
		go func(conn net.Conn) {
			// 1 byte a second until the server hangs up (or 30 s)
			for i := 0; i < 30; i++ {
				if _, err := conn.Write([]byte("x")); err != nil {
					cut <- time.Since(start)
					return
				}
				time.Sleep(time.Second)
			}
			cut <- -1
		}(conn)
		go func(conn net.Conn) { io.Copy(io.Discard, conn) }(conn)
	}
	time.Sleep(2 * time.Second) // the slow uploads are all in
	wav := oneSecondWAV()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	status, _, body, err := transcribe(ctx, http.DefaultClient, c.base, bytes.NewReader(wav), len(wav))
	// a Wyoming utterance meanwhile
	wyo := "no answer"
	if wc, err := wyoming.Dial(ctx, c.asr); err == nil {
		f := wyoming.AudioFormat{Rate: 16000, Width: 2, Channels: 1}
		wc.Write(wyoming.NewEvent(wyoming.TypeAudioStart, f))
		e := wyoming.NewEvent(wyoming.TypeAudioChunk, f)
		e.Payload = wav[44:]
		wc.Write(e)
		wc.Write(wyoming.NewEvent(wyoming.TypeAudioStop, nil))
		for {
			ev, err := wc.Read(30 * time.Second)
			if err != nil {
				wyo = err.Error()
				break
			}
			if ev.Type == wyoming.TypeTranscript || ev.Type == wyoming.TypeError {
				var m struct{ Text, Code string }
				ev.Decode(&m)
				wyo = ev.Type + " " + m.Code
				break
			}
		}
		wc.Close()
	}
	var cuts []string
	timeout := time.After(25 * time.Second)
	for range 10 {
		select {
		case d := <-cut:
			if d < 0 {
				cuts = append(cuts, "open")
			} else {
				cuts = append(cuts, fmt.Sprintf("%.0fs", d.Seconds()))
			}
		case <-timeout:
			cuts = append(cuts, "open")
		}
	}
	abuseFigures.add(t, "10 uploads at 1 byte/s: a normal transcription got %d, a Wyoming utterance got %q; slow uploads cut after %v", status, wyo, cuts)
	if err != nil || status != 200 {
		t.Errorf("transcription during slow uploads: %d %v %s", status, err, body)
	}
	if wyo != wyoming.TypeTranscript+" " {
		t.Errorf("Wyoming during slow uploads: %s", wyo)
	}
	for _, s := range cuts {
		if s == "open" {
			t.Errorf("a 1 byte/s upload was never cut: %v", cuts)
			break
		}
	}
}

// Forty transcriptions of 1 s at once are about a second of work for two workers: none is
// refused. The forty come from one address, which alone may have 48 uploads being received
// at once (16 when many addresses upload; a 429 beyond, by design); how many overlap depends
// on how fast the server reads them, so here the per-client upload cap is above the burst
// and the queue alone decides.
func testAbuseBurst(t *testing.T) {
	c := startChild(t, "PARLEY_CHILD_RTF=0.025", "PARLEY_CHILD_UPLOADS_PER_CLIENT=64")
	wav := oneSecondWAV()
	var wg sync.WaitGroup
	var ok, refused, other atomic.Int64
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	start := time.Now()
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _, _, err := transcribe(context.Background(), client, c.base, bytes.NewReader(wav), len(wav))
			switch {
			case err == nil && status == 200:
				ok.Add(1)
			case err == nil && status == 429:
				refused.Add(1)
			default:
				other.Add(1)
			}
		}()
	}
	wg.Wait()
	abuseFigures.add(t, "40 simultaneous 1 s transcriptions: %d answered, %d refused (429), %d other, in %.2f s", ok.Load(), refused.Load(), other.Load(), time.Since(start).Seconds())
	if refused.Load() > 0 || other.Load() > 0 {
		t.Errorf("%d refused, %d failed", refused.Load(), other.Load())
	}
}

// Retry-After tells how long the queue really needs: after two slow jobs, short ones fill
// the queue; a 429 announces the work ahead, which is then done (both are figures).
func testAbuseRetryAfter(t *testing.T) {
	c := startChild(t, "PARLEY_CHILD_RTF=0.01", "PARLEY_CHILD_QUEUE=8")
	ctx := context.Background()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	long := func(seconds int) (int, error) {
		st, _, _, err := transcribe(ctx, client, c.base, newToneWAV(16000, seconds*32000), 44+seconds*32000)
		return st, err
	}
	// two slow jobs (300 s of audio, 3 s of work each) teach the server what jobs cost
	for range 2 {
		if st, err := long(300); st != 200 || err != nil {
			t.Fatalf("slow job: %d %v", st, err)
		}
	}
	// two more slow jobs occupy the workers; short ones (1 s of audio, ~30 ms) fill the queue
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); long(300) }()
	}
	time.Sleep(300 * time.Millisecond)
	wav := oneSecondWAV()
	// the first refusal: what it announced, and when (requests still queued may be refused
	// later, from their own goroutines)
	var mu sync.Mutex
	var retry time.Duration
	refusedAt := time.Time{}
	refused := func() bool { mu.Lock(); defer mu.Unlock(); return retry != 0 }
	for i := 0; i < 400 && !refused(); i++ {
		wg.Add(1)
		done := make(chan struct{})
		go func() {
			defer wg.Done()
			st, h, _, err := transcribe(ctx, client, c.base, bytes.NewReader(wav), len(wav))
			if err == nil && st == 429 {
				s, _ := strconv.Atoi(h.Get("Retry-After"))
				if s == 0 {
					t.Errorf("429 without Retry-After")
					s = -1
				}
				mu.Lock()
				if retry == 0 {
					retry, refusedAt = time.Duration(s)*time.Second, time.Now()
				}
				mu.Unlock()
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Millisecond): // queued
		}
	}
	if !refused() {
		t.Fatal("the queue never filled")
	}
	// when is a short job admitted again?
	var admitted time.Duration
	for {
		st, _, _, err := transcribe(ctx, client, c.base, bytes.NewReader(wav), len(wav))
		if err == nil && st == 200 {
			admitted = time.Since(refusedAt)
			break
		}
		if time.Since(refusedAt) > 2*time.Minute {
			t.Fatal("never admitted again")
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	drained := time.Since(refusedAt)
	mu.Lock()
	defer mu.Unlock()
	// How close the announcement is to the real work ahead depends on the machine's load: it
	// is a figure here, and TestLimiterRetryAfterIsTheWorkAhead checks it on a fake clock.
	abuseFigures.add(t, "after two slow jobs, a full queue announced Retry-After %v; the work ahead was done after %.1f s (a job was admitted again after %.1f s)",
		retry, drained.Seconds(), admitted.Seconds())
}

// Twelve concurrent 60 MB uploads stay within the memory bound.
func testAbuseBigUploads(t *testing.T) {
	c := startChild(t, "PARLEY_CHILD_RTF=0.0005")
	time.Sleep(200 * time.Millisecond)
	base, _, _ := c.proc()
	c.resetPeak()
	n, size := 12, 60<<20
	if !fullLoad() {
		n = 6
	}
	var wg sync.WaitGroup
	var codes sync.Map
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _, b, err := transcribe(context.Background(), client, c.base, newToneWAV(16000, size), 44+size)
			if err != nil {
				codes.Store(err.Error(), true)
				return
			}
			codes.Store(st, true)
			if st != 200 && st != 429 {
				t.Errorf("60 MB upload: %d %s", st, b)
			}
		}()
	}
	wg.Wait()
	_, peak, _ := c.proc()
	var got []string
	codes.Range(func(k, _ any) bool { got = append(got, fmt.Sprint(k)); return true })
	abuseFigures.add(t, "%d concurrent 60 MB uploads: server RSS %s before, peak %s (statuses %v, %.1f s)", n, mb(base), mb(peak), got, time.Since(start).Seconds())
	if memoryJudged(t) && peak > memoryBound {
		t.Errorf("peak RSS %s over the %s bound", mb(peak), mb(memoryBound))
	}
}

// memoryBound is the per-process resident memory the README promises for the server with
// its engines' own memory aside (these fakes hold none).
const memoryBound = 500 << 20

// memoryJudged says whether resident memory is held to its bounds: the race detector
// multiplies what a process holds (a 32-session run peaked at 900 MB under it), so there
// the figures are reported and not judged.
func memoryJudged(t *testing.T) bool {
	if raceDetector {
		t.Log("memory not judged: built with the race detector")
	}
	return !raceDetector
}

// Thirty-two realtime sessions each buffer as much audio as they may; memory stays within
// the bound, and returns near the baseline (threads too) once they close.
func testAbuseRealtime(t *testing.T) {
	env := []string{"PARLEY_CHILD_SILERO=1"}
	c := startChild(t, env...)
	time.Sleep(200 * time.Millisecond)
	base, _, baseThreads := c.proc()
	c.resetPeak()
	sessions, seconds := 32, 300
	if !fullLoad() {
		seconds = 60
	}
	url := strings.Replace(c.base, "http", "ws", 1) + "/v1/realtime"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// one second of 24 kHz PCM16, base64, in an append event
	pcm := make([]byte, 48000)
	for i := 0; i < 24000; i++ {
		binary.LittleEndian.PutUint16(pcm[2*i:], uint16(int16(2000*math.Sin(float64(i)*0.05))))
	}
	appendMsg, _ := json.Marshal(map[string]any{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(pcm)})
	var conns []*websocket.Conn
	var mu sync.Mutex
	var full atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < sessions; i++ {
		wc, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		wc.SetReadLimit(1 << 20)
		mu.Lock()
		conns = append(conns, wc)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			// manual turns: everything appended stays buffered until commit
			wc.Write(ctx, websocket.MessageText, []byte(`{"type":"session.update","session":{"turn_detection":null}}`))
			synced := make(chan struct{})
			go func() {
				for {
					_, b, err := wc.Read(ctx)
					if err != nil {
						return
					}
					if bytes.Contains(b, []byte(`"input_audio_buffer_full"`)) {
						full.Add(1)
					}
					if bytes.Contains(b, []byte(`"sync-marker"`)) {
						close(synced)
					}
				}
			}()
			for s := 0; s < seconds; s++ {
				if err := wc.Write(ctx, websocket.MessageText, appendMsg); err != nil {
					return
				}
			}
			// events are handled in order: the answer to this one means every append is in
			wc.Write(ctx, websocket.MessageText, []byte(`{"type":"parley.sync","event_id":"sync-marker"}`))
			select {
			case <-synced:
			case <-ctx.Done():
			}
		}()
	}
	wg.Wait()
	_, peak, threads := c.proc()
	for _, wc := range conns {
		wc.Close(websocket.StatusNormalClosure, "")
	}
	after, afterThreads := c.settle(20 * time.Second)
	abuseFigures.add(t, "%d realtime sessions × %d s buffered (vad %s): RSS %s before, peak %s, %s after they closed; threads %d → %d → %d; %d buffer-full errors; %.1f s",
		sessions, seconds, c.vad, mb(base), mb(peak), mb(after), baseThreads, threads, afterThreads, full.Load(), time.Since(start).Seconds())
	if memoryJudged(t) && peak > memoryBound {
		t.Errorf("peak RSS %s over the %s bound", mb(peak), mb(memoryBound))
	}
	if memoryJudged(t) && after > base+64<<20 {
		t.Errorf("RSS %s after the sessions closed, baseline %s", mb(after), mb(base))
	}
	if afterThreads > baseThreads+8 {
		t.Errorf("threads %d after the sessions closed, baseline %d", afterThreads, baseThreads)
	}
}

// Sixty-four Wyoming connections each send the longest utterance allowed; memory stays
// within the bound.
func testAbuseWyoming(t *testing.T) {
	c := startChild(t, "PARLEY_CHILD_RTF=0.0005")
	time.Sleep(200 * time.Millisecond)
	base, _, _ := c.proc()
	c.resetPeak()
	conns, seconds := 64, 300
	if !fullLoad() {
		seconds = 60
	}
	f := wyoming.AudioFormat{Rate: 16000, Width: 2, Channels: 1}
	chunk := wyoming.NewEvent(wyoming.TypeAudioChunk, f)
	chunk.Payload = make([]byte, 32000)
	for i := 0; i < 16000; i++ {
		binary.LittleEndian.PutUint16(chunk.Payload[2*i:], uint16(int16(2000*math.Sin(float64(i)*0.05))))
	}
	frame, _ := wyoming.AppendEvent(nil, chunk)
	var wg sync.WaitGroup
	var results sync.Map
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc, err := wyoming.Dial(context.Background(), c.asr)
			if err != nil {
				results.Store("dial: "+err.Error(), true)
				return
			}
			defer wc.Close()
			wc.Write(wyoming.NewEvent(wyoming.TypeAudioStart, f))
			for s := 0; s < seconds; s++ {
				if err := wc.WriteRaw(frame); err != nil {
					break
				}
			}
			wc.Write(wyoming.NewEvent(wyoming.TypeAudioStop, nil))
			for {
				ev, err := wc.Read(2 * time.Minute)
				if err != nil {
					results.Store("read: "+err.Error(), true)
					return
				}
				if ev.Type == wyoming.TypeTranscript {
					results.Store("transcript", true)
					return
				}
				if ev.Type == wyoming.TypeError {
					var m struct{ Code string }
					ev.Decode(&m)
					results.Store("error "+m.Code, true)
					return
				}
			}
		}()
	}
	wg.Wait()
	_, peak, _ := c.proc()
	var got []string
	results.Range(func(k, _ any) bool { got = append(got, fmt.Sprint(k)); return true })
	after, _ := c.settle(20 * time.Second)
	abuseFigures.add(t, "%d Wyoming utterances × %d s: RSS %s before, peak %s, %s after; results %v; %.1f s", conns, seconds, mb(base), mb(peak), mb(after), got, time.Since(start).Seconds())
	if memoryJudged(t) && peak > memoryBound {
		t.Errorf("peak RSS %s over the %s bound", mb(peak), mb(memoryBound))
	}
}
