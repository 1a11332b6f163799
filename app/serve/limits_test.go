package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/tts"
)

// fakeClock is a limiter's clock that moves only when a test moves it.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func withFakeClock(l *Limiter) *fakeClock {
	c := &fakeClock{t: time.Unix(1e9, 0)}
	l.now = c.now
	return c
}

// The limiter admits by work: many cheap jobs fit where a few expensive ones do not, and a
// refusal's Retry-After is the time the queue, as it stands, needs.
func TestLimiterAdmitsByWork(t *testing.T) {
	l := NewLimiter("x", LimiterConfig{Workers: 1, MaxWait: 10 * time.Second, MaxQueued: 1000, Prior: 0.1})
	withFakeClock(l)
	// one job runs; cheap ones (0.1 s of work each) wait: a hundred fit in 10 s of waiting
	var ts []*Ticket
	for i := 0; i < 101; i++ {
		tk, err := l.Admit(1)
		if err != nil {
			t.Fatalf("cheap job %d refused", i)
		}
		ts = append(ts, tk)
	}
	if _, err := l.Admit(1); !errors.Is(err, ErrBusy) {
		t.Fatalf("job past 10 s of queued work admitted: %v", err)
	}
	// about 10 s of work is ahead (the running job's 0.1 s and a hundred waiting)
	if ra := l.RetryAfter(); ra < 10*time.Second || ra > 11*time.Second {
		t.Errorf("Retry-After %v, want about 10 s", ra)
	}
	for _, tk := range ts {
		tk.Done()
	}
	// an expensive job is admitted when nothing waits, even beyond MaxWait (a fresh limiter:
	// this one has learnt from the instant jobs above that work costs nothing)
	l = NewLimiter("x", LimiterConfig{Workers: 1, MaxWait: 10 * time.Second, MaxQueued: 1000, Prior: 0.1})
	withFakeClock(l)
	big, err := l.Admit(1000)
	if err != nil {
		t.Fatal(err)
	}
	// 100 s of the big job is ahead: refused, told to come back when it is done
	if _, err := l.Admit(1); !errors.Is(err, ErrBusy) {
		t.Fatal("admitted behind 100 s of work")
	}
	if ra := l.RetryAfter(); ra < 99*time.Second || ra > 101*time.Second {
		t.Errorf("Retry-After %v behind a 100 s job, want 100 s", ra)
	}
	big.Done()
}

// The limiter learns what a unit of cost takes from the jobs it ran: two slow jobs of
// long audio do not make short ones look slow.
func TestLimiterLearnsCost(t *testing.T) {
	l := NewLimiter("x", LimiterConfig{Workers: 1, Prior: 1})
	clock := withFakeClock(l)
	run := func(cost float64, d time.Duration) {
		tk, _ := l.Admit(cost)
		tk.Wait(context.Background())
		clock.add(d)
		tk.Done()
	}
	run(100, 200*time.Millisecond) // two long jobs: 2 ms per unit
	run(100, 200*time.Millisecond)
	run(1, 2*time.Millisecond) // a short one at the same speed changes nothing
	l.mu.Lock()
	rate := l.rateLocked()
	l.mu.Unlock()
	if math.Abs(rate-0.002) > 1e-12 {
		t.Errorf("learnt %g s per unit, want 0.002", rate)
	}
}

// Retry-After is the work ahead, at the rate the limiter measured: a job refused now and
// sent again after it finds a worker free and nothing waiting (the world running on a fake
// clock as the limiter learnt it).
func TestLimiterRetryAfterIsTheWorkAhead(t *testing.T) {
	l := NewLimiter("x", LimiterConfig{Workers: 2, MaxQueued: 8, MaxWait: time.Minute, Prior: 1})
	clock := withFakeClock(l)
	const perUnit = 10 * time.Millisecond
	for range 2 { // two slow jobs (300 units, 3 s) teach the limiter its speed
		tk, _ := l.Admit(300)
		tk.Wait(context.Background())
		clock.add(300 * perUnit)
		tk.Done()
	}
	var jobs []*Ticket
	for {
		cost := 20.0
		if len(jobs) < 2 {
			cost = 300
		}
		tk, err := l.Admit(cost)
		if err != nil {
			break
		}
		jobs = append(jobs, tk)
	}
	if len(jobs) != 10 {
		t.Fatalf("%d jobs admitted, want 2 running and 8 waiting", len(jobs))
	}
	retry := l.RetryAfter()
	// the world runs as learnt: a running job ends after cost × 10 ms
	var clear time.Duration
	for step := time.Duration(0); step <= time.Minute; step += perUnit {
		for _, tk := range jobs {
			if tk.state == running && clock.now().Sub(tk.start) >= time.Duration(tk.cost)*perUnit {
				tk.Done()
			}
		}
		if l.Waiting() == 0 && l.Running() < 2 {
			clear = step
			break
		}
		clock.add(perUnit)
	}
	// 3 s running, then 8 × 0.2 s on two workers: 3.8 s
	if clear == 0 || retry < clear-perUnit || retry > clear+perUnit || retry < 3700*time.Millisecond {
		t.Errorf("Retry-After %v, but a worker was free with nothing waiting after %v", retry, clear)
	}
}

// A running job that has already taken longer than the rate the limiter learnt shows the
// engine is slower now: the work ahead is costed at its pace, not the old one's.
func TestLimiterRateFollowsAnOverrunningJob(t *testing.T) {
	l := NewLimiter("x", LimiterConfig{Workers: 1, MaxQueued: 1, MaxWait: time.Hour, Prior: 0.01})
	clock := withFakeClock(l)
	run, _ := l.Admit(100) // learnt pace: 1 s
	waiting, _ := l.Admit(100)
	clock.add(3 * time.Second) // still running at 3 s: 30 ms a unit
	if ra := l.RetryAfter(); ra < 3*time.Second || ra > 4*time.Second {
		t.Errorf("Retry-After %v behind a job three times slower than learnt and 100 units more, want about 3.3 s", ra)
	}
	run.Done()
	waiting.Done()
}

func TestLimiterCancelledWaitFreesItsPlace(t *testing.T) {
	l := NewLimiter("x", LimiterConfig{Workers: 1, MaxQueued: 1})
	a, _ := l.Admit(1)
	b, _ := l.Admit(1)
	if _, err := l.Admit(1); !errors.Is(err, ErrBusy) {
		t.Fatal("queue of 1 took two")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Wait(ctx); err == nil {
		t.Fatal("wait on a cancelled context succeeded")
	}
	if l.Waiting() != 0 {
		t.Fatalf("%d waiting after the only waiter left", l.Waiting())
	}
	c, err := l.Admit(1)
	if err != nil {
		t.Fatal("the place was not freed")
	}
	a.Done()
	if err := c.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Done()
	b.Done() // harmless
	if l.Running() != 0 || l.Waiting() != 0 {
		t.Errorf("running %d waiting %d", l.Running(), l.Waiting())
	}
}

func TestLimiterBatches(t *testing.T) {
	l := NewLimiter("x", LimiterConfig{Workers: 1, MaxBatch: 3})
	first, _ := l.Admit(1) // runs alone
	var ts []*Ticket
	for i := 0; i < 5; i++ {
		key := "a"
		if i == 2 {
			key = "b" // another language: never in an "a" batch
		}
		tk, _ := l.AdmitBatch(1, i, key)
		ts = append(ts, tk)
	}
	first.Done()
	// the first waiting job leads, taking along up to 2 more of its key
	if err := ts[0].Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []any
	for _, g := range ts[0].Group() {
		got = append(got, g.Batch)
	}
	if fmt.Sprint(got) != "[1 3]" {
		t.Errorf("batch took %v, want [1 3]", got)
	}
	if ts[1].Leader() != ts[0] || ts[3].Leader() != ts[0] || ts[2].Leader() != nil {
		t.Error("leaders wrong")
	}
	ts[0].Done()
	for _, i := range []int{2, 4} {
		if err := ts[i].Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ts[i].Leader() != nil || len(ts[i].Group()) != 0 {
			t.Errorf("job %d ran with others", i)
		}
		ts[i].Done()
	}
	if l.Running() != 0 || l.Waiting() != 0 {
		t.Errorf("running %d waiting %d", l.Running(), l.Waiting())
	}
}

// batchASR is a fakeASR that also batches, counting model calls.
type batchASR struct {
	fakeASR
	batches atomic.Int64
	inputs  atomic.Int64
}

func (b *batchASR) TranscribeBatch(ctx context.Context, inputs [][]float32, o asr.Options) ([]*asr.Result, error) {
	b.batches.Add(1)
	b.inputs.Add(int64(len(inputs)))
	out := make([]*asr.Result, len(inputs))
	for i, x := range inputs {
		r, err := b.fakeASR.TranscribeWith(ctx, x, o)
		if err != nil {
			return nil, err
		}
		r.Text = fmt.Sprintf("%d samples", len(x))
		out[i] = r
	}
	return out, nil
}

// Short transcriptions waiting together run as one batch through a recogniser that batches,
// each getting its own result.
func TestShortTranscriptionsAreBatched(t *testing.T) {
	e := &batchASR{fakeASR: fakeASR{delay: 100 * time.Millisecond}}
	s, base := testServer(t, Engines{ASR: e}, func(o *Options) { o.Config.MaxConcurrentASR = 1 })
	var wg sync.WaitGroup
	errs := make(chan string, 12)
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			secs := 0.5 + float64(i)/10
			ct, body := multipartBody(t, wavBytes(t, 16000, 1, secs), [2]string{"model", "whisper-1"})
			resp, b := post(t, base+"/v1/audio/transcriptions", ct, body)
			var v struct{ Text string }
			json.Unmarshal(b, &v)
			if want := fmt.Sprintf("%d samples", int(secs*16000)); resp.StatusCode != 200 || (v.Text != want && v.Text != "hello world") {
				errs <- fmt.Sprintf("%d: %d %s (want %q)", i, resp.StatusCode, b, want)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if e.batches.Load() == 0 || e.inputs.Load() <= e.batches.Load() {
		t.Errorf("%d batches of %d inputs: nothing was batched", e.batches.Load(), e.inputs.Load())
	}
	t.Logf("%d batches of %d inputs, %d alone", e.batches.Load(), e.inputs.Load(), e.calls.Load()-e.inputs.Load())
	if s.asrLim.Running() != 0 || s.asrLim.Waiting() != 0 {
		t.Error("places left taken")
	}
}

// One client address cannot hold every connection: past its cap it gets a 429 in OpenAI's
// shape, while another address is still served.
func TestConnectionCaps(t *testing.T) {
	_, base := testServer(t, Engines{TTS: &fakeTTS{}}, func(o *Options) { o.MaxConnsPerClient = 3 })
	addr := strings.TrimPrefix(base, "http://")
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	time.Sleep(50 * time.Millisecond)
	resp, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("fourth connection: %d %s", resp.StatusCode, b)
	}
	if _, _, _, code := apiErr(t, b); code != "too_many_connections" {
		t.Errorf("code %q", code)
	}
	// another client address (127.0.0.2 is loopback too on Linux) is not affected
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("another client: %v %v", r, err)
	}
	// a closed connection gives its place back
	held[0].Close()
	held = held[1:]
	deadline := time.Now().Add(30 * time.Second) // a bound for a broken server, not a timing
	for {
		resp, err := http.Get(base + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed connection's place never came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An upload larger than the in-memory part goes to a temporary file, removed once the
// request is done.
func TestUploadSpoolsToDiskAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	_, base := testServer(t, Engines{ASR: &fakeASR{}}, func(o *Options) { o.TempDir = dir })
	ct, body := multipartBody(t, wavBytes(t, 16000, 1, 40), [2]string{"model", "whisper-1"}) // 1.3 MB
	resp, b := post(t, base+"/v1/audio/transcriptions", ct, body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	var sp spool
	sp.memMax, sp.dir = 10, dir
	sp.Write([]byte("0123456789abc"))
	if sp.Path() == "" {
		t.Fatal("13 bytes stayed in a 10-byte memory part")
	}
	r, _ := sp.Reader()
	got, _ := io.ReadAll(r)
	if string(got) != "0123456789abc" {
		t.Errorf("read back %q", got)
	}
	sp.Close()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("spool file left: %v", left)
	}
}

// translator is an LLM that "translates" by upper-casing.
type translator struct{ calls atomic.Int64 }

func (*translator) Name() string                                { return "fake" }
func (*translator) URL() string                                 { return "" }
func (*translator) Health(context.Context) error                { return nil }
func (*translator) Models(context.Context) ([]llm.Model, error) { return []llm.Model{{ID: "m"}}, nil }
func (tr *translator) Chat(ctx context.Context, req *llm.Request, fn func(llm.Delta) error) error {
	tr.calls.Add(1)
	if req.Messages[0].Role != llm.RoleSystem || !strings.Contains(req.Messages[0].Content, "English") {
		return errors.New("no translation instruction")
	}
	return fn(llm.Delta{Content: strings.ToUpper(req.Messages[len(req.Messages)-1].Content), FinishReason: llm.FinishStop})
}

// frenchASR hears French.
type frenchASR struct{ fakeASR }

func (f *frenchASR) TranscribeWith(ctx context.Context, pcm []float32, o asr.Options) (*asr.Result, error) {
	r, err := f.fakeASR.TranscribeWith(ctx, pcm, o)
	if err == nil {
		r.Text, r.Lang = "bonjour le monde", "fr"
		r.Segments[0].Text, r.Segments[0].Lang = r.Text, "fr"
	}
	return r, err
}

func TestTranslations(t *testing.T) {
	ct, body := multipartBody(t, wavBytes(t, 16000, 1, 1), [2]string{"model", "whisper-1"})
	// SenseVoice alone cannot translate: a clear 400 in the standard shape
	_, base := testServer(t, Engines{ASR: &frenchASR{}}, nil)
	resp, b := post(t, base+"/v1/audio/translations", ct, body)
	if msg, _, _, code := apiErr(t, b); resp.StatusCode != 400 || code != "translation_not_supported" || !strings.Contains(msg, "cannot translate") {
		t.Errorf("without an LLM: %d %s", resp.StatusCode, b)
	}
	// with an LLM backend, the transcript goes through it
	tr := &translator{}
	_, base = testServer(t, Engines{ASR: &frenchASR{}, LLM: tr, LLMModel: "m"}, nil)
	resp, b = post(t, base+"/v1/audio/translations", ct, body)
	var v struct{ Text string }
	json.Unmarshal(b, &v)
	if resp.StatusCode != 200 || v.Text != "BONJOUR LE MONDE" {
		t.Errorf("translation: %d %s", resp.StatusCode, b)
	}
	ct2, body2 := multipartBody(t, wavBytes(t, 16000, 1, 1), [2]string{"model", "whisper-1"}, [2]string{"response_format", "srt"})
	resp, b = post(t, base+"/v1/audio/translations", ct2, body2)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "BONJOUR LE MONDE") || !strings.Contains(string(b), "-->") {
		t.Errorf("srt translation: %d %s", resp.StatusCode, b)
	}
	// /v1/models says the recogniser translates now
	r, _ := http.Get(base + "/v1/models/whisper-1")
	var m modelEntry
	json.NewDecoder(r.Body).Decode(&m)
	r.Body.Close()
	if !strings.Contains(strings.Join(m.Capabilities, ","), "translation") {
		t.Errorf("whisper-1 capabilities %v", m.Capabilities)
	}
}

// stepTTS speaks one 0.5 s tone per sentence, waiting on next before each after the first.
type stepTTS struct {
	fakeTTS
	next chan struct{}
}

func (f *stepTTS) Synthesize(ctx context.Context, req tts.Request) (tts.Stream, error) {
	rate := 24000
	return tts.NewStream(ctx, nil, func(ctx context.Context, emit func(tts.Chunk) error) error {
		for i, s := range strings.Split(req.Text, ".") {
			if strings.TrimSpace(s) == "" {
				continue
			}
			if i > 0 {
				select {
				case <-f.next:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			x := make([]float32, rate/2)
			for j := range x {
				x[j] = float32(0.3 * math.Sin(2*math.Pi*440*float64(j)/float64(rate)))
			}
			if err := emit(tts.Chunk{Samples: x, SampleRate: rate, Sentence: i, Text: s}); err != nil {
				return err
			}
		}
		return nil
	}), nil
}

// Encoded formats stream: the first sentence's mp3/opus/aac reaches the client while the
// second is still being synthesised, as plain audio and as SSE deltas.
func TestSpeechEncodedFormatsStream(t *testing.T) {
	if !encodable()["mp3"] {
		t.Skip("ffmpeg with libmp3lame not installed")
	}
	eng := &stepTTS{next: make(chan struct{})}
	_, base := testServer(t, Engines{TTS: eng}, nil)
	for _, tc := range []struct{ format, stream string }{{"mp3", "audio"}, {"opus", "audio"}, {"aac", "audio"}, {"opus", "sse"}} {
		body := fmt.Sprintf(`{"model":"tts-1","input":"One. Two.","voice":"alloy","response_format":%q,"stream_format":%q}`, tc.format, tc.stream)
		client := &http.Client{Timeout: 30 * time.Second}
		resp, err := client.Post(base+"/v1/audio/speech", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan int, 1)
		go func() {
			b := make([]byte, 1)
			n, _ := io.ReadFull(resp.Body, b)
			got <- n
		}()
		select {
		case n := <-got:
			if n != 1 {
				t.Errorf("%s/%s: no first byte", tc.format, tc.stream)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s/%s: nothing arrived before the second sentence was synthesised", tc.format, tc.stream)
		}
		eng.next <- struct{}{}
		rest, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(rest) < 100 {
			t.Errorf("%s/%s: %d, %d bytes", tc.format, tc.stream, resp.StatusCode, len(rest))
		}
		if tc.stream == "sse" && !strings.Contains(string(rest), "speech.audio.done") {
			t.Errorf("sse stream lacks speech.audio.done")
		}
	}
}

func TestBCP47(t *testing.T) {
	for in, want := range map[string]string{"en-gb": "en-GB", "en_us": "en-US", "cmn-latn-pinyin": "cmn-Latn-pinyin", "fr": "fr",
		"es-419": "es-419", "vi-vn-x-south": "vi-VN-x-south", "pt-BR": "pt-BR", "EN": "en"} {
		if got := bcp47(in); got != want {
			t.Errorf("bcp47(%q) = %q, want %q", in, got, want)
		}
	}
}

// Drain keeps the waiting jobs that will be done by the deadline, refuses the rest with
// ErrShuttingDown from Wait (a refused job leaves its worker's time to the next), and admits
// nothing more.
func TestLimiterDrain(t *testing.T) {
	l := NewLimiter("x", LimiterConfig{Workers: 1, MaxWait: time.Hour, MaxQueued: 100, Prior: 1})
	c := withFakeClock(l)
	run, err := l.Admit(4) // 4 s of work
	if err != nil {
		t.Fatal(err)
	}
	var q []*Ticket
	for _, cost := range []float64{3, 5, 2, 1} {
		tk, err := l.Admit(cost)
		if err != nil {
			t.Fatal(err)
		}
		q = append(q, tk)
	}
	c.add(time.Second) // the running job has 3 s left
	// by the deadline 10 s from now: 3 s running, then 3 (done at 6), 5 would end at 11:
	// refused, 2 (done at 8), 1 (done at 9)
	if n := l.Drain(c.now().Add(10 * time.Second)); n != 1 {
		t.Errorf("refused %d, want 1", n)
	}
	ctx := context.Background()
	if err := q[1].Wait(ctx); !errors.Is(err, ErrShuttingDown) {
		t.Errorf("the job that cannot finish: Wait = %v", err)
	}
	if l.Waiting() != 3 {
		t.Errorf("%d waiting, want 3", l.Waiting())
	}
	if _, err := l.Admit(0.1); !errors.Is(err, ErrShuttingDown) {
		t.Errorf("admitted while draining: %v", err)
	}
	q[1].Done() // a refused ticket's Done is harmless
	run.Done()
	for _, i := range []int{0, 2, 3} {
		if err := q[i].Wait(ctx); err != nil {
			t.Errorf("kept job %d: %v", i, err)
		}
		q[i].Done()
	}
	if l.Waiting()+l.Running() != 0 {
		t.Errorf("left behind: %d waiting, %d running", l.Waiting(), l.Running())
	}
}

// One address may hold more than its 16 upload places while it is alone (a reverse proxy
// speaks for many users), never all of them: a newcomer still finds 16; and once two share
// the server, each gets an even share of the rest as its uploads end.
func TestUploadGateSharesFairly(t *testing.T) {
	g := newUploadGate(64, 16)
	take := func(client string, n int) (got int, leaves []func()) {
		for range n {
			leave, ok := g.enter(client)
			if !ok {
				break
			}
			got++
			leaves = append(leaves, leave)
		}
		return got, leaves
	}
	n, proxy := take("proxy", 64)
	if n != 48 {
		t.Fatalf("a lone address got %d places, want 48 (64 less 16 kept for a newcomer)", n)
	}
	n, other := take("laptop", 64)
	if n != 16 {
		t.Fatalf("a newcomer got %d places, want 16", n)
	}
	// the proxy is over its share now (64-16 split two ways: 24): its uploads that end are
	// not replaced until it is under it
	for _, leave := range proxy[:20] {
		leave()
	}
	if n, more := take("proxy", 64); n != 0 {
		t.Errorf("at 28 places the proxy got %d more, want none over its share of 24", n)
		for _, l := range more {
			l()
		}
	}
	for _, leave := range proxy[20:25] {
		leave()
	}
	if n, more := take("proxy", 64); n != 1 {
		t.Errorf("at 23 places the proxy got %d more, want 1 (its share is 24)", n)
	} else {
		more[0]()
	}
	for _, leave := range append(proxy[25:], other...) {
		leave()
	}
	if g.active() != 0 {
		t.Errorf("%d places held after every upload ended", g.active())
	}
}
