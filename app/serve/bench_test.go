package serve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/tts"
)

// Benchmarks run on the real engines: the embedded demo SenseVoice model when present
// (else the tiny test model) and espeak-ng. Each reports, from one run:
//   req/s          requests per second through the server (sequential, server time only)
//   p50_ms, p99_ms latency of a request through the server
//   direct_p50_ms  the same work calling the engine directly
//   overhead_ms    median of (server − direct) over back-to-back pairs (HTTP, multipart/JSON,
//                  decoding, encoding, queue), so both sides see the same machine load
//   overhead_ratio (direct p50 + overhead) / direct p50
//
//	go test ./app/serve -run '^$' -bench . -benchtime 20x

func percentile(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// report takes paired samples (server[i] and direct[i] ran back to back, so both saw the
// same machine load) and reports the median of the per-pair differences as the overhead.
func report(b *testing.B, server, direct []time.Duration, serverTotal time.Duration) {
	p50, p99, d50 := percentile(server, 0.5), percentile(server, 0.99), percentile(direct, 0.5)
	diff := make([]time.Duration, len(server))
	for i := range server {
		diff[i] = server[i] - direct[i]
	}
	over := percentile(diff, 0.5)
	b.ReportMetric(float64(len(server))/serverTotal.Seconds(), "req/s")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(d50.Microseconds())/1000, "direct_p50_ms")
	b.ReportMetric(float64(over.Microseconds())/1000, "overhead_ms")
	if d50 > 0 {
		b.ReportMetric(float64(d50+over)/float64(d50), "overhead_ratio")
	}
	b.ReportMetric(0, "ns/op")
}

func BenchmarkTranscription(b *testing.B) {
	rec, id, _ := realASR(b)
	eng := realTTS(b)
	_, base := testServer(b, Engines{ASR: rec, ASRModel: id}, nil)
	st, err := eng.Synthesize(context.Background(), tts.Request{Text: "Hello, this is a three second sentence for the speech recognizer to hear.", SampleRate: 16000})
	if err != nil {
		b.Fatal(err)
	}
	buf, err := tts.ReadAll(context.Background(), st)
	if err != nil {
		b.Fatal(err)
	}
	var wav bytes.Buffer
	audio.WriteWAV(&wav, buf, audio.S16)
	ct, body := multipartBody(b, wav.Bytes(), [2]string{"model", "whisper-1"})
	b.Logf("model %s, %.1f s of audio", id, buf.Duration().Seconds())
	client := &http.Client{}
	do := func() time.Duration {
		t0 := time.Now()
		req, _ := http.NewRequest("POST", base+"/v1/audio/transcriptions", bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(t0)
	}
	do() // warm up
	opts := rec.Options()
	b.ResetTimer()
	var server, direct []time.Duration
	var total time.Duration
	for i := 0; i < b.N; i++ {
		d := do()
		server, total = append(server, d), total+d
		t0 := time.Now()
		if _, err := rec.TranscribeWith(context.Background(), buf.Data, opts); err != nil {
			b.Fatal(err)
		}
		direct = append(direct, time.Since(t0))
	}
	b.StopTimer()
	report(b, server, direct, total)
}

func BenchmarkSpeech(b *testing.B) {
	eng := realTTS(b)
	_, base := testServer(b, Engines{TTS: eng, TTSEngine: "espeak"}, nil)
	text := "Good morning. The weather today is sunny with a light breeze."
	body := []byte(`{"model":"tts-1","input":"` + text + `","voice":"alloy","response_format":"wav"}`)
	client := &http.Client{}
	do := func() time.Duration {
		t0 := time.Now()
		resp, err := client.Post(base+"/v1/audio/speech", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(t0)
	}
	do()
	req := tts.Request{Text: text, SampleRate: SpeechRate, Seed: OpenAIVoices["alloy"].Seed, HasSeed: true}
	b.ResetTimer()
	var server, direct []time.Duration
	var total time.Duration
	for i := 0; i < b.N; i++ {
		d := do()
		server, total = append(server, d), total+d
		t0 := time.Now()
		st, err := eng.Synthesize(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := st.Next(context.Background()); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		st.Close()
		direct = append(direct, time.Since(t0))
	}
	b.StopTimer()
	report(b, server, direct, total)
}

// BenchmarkServerOverhead measures the server alone on instant fake engines: the cost of
// HTTP, multipart parsing, WAV decoding and resampling, the queue and the JSON answer.
func BenchmarkServerOverhead(b *testing.B) {
	_, base := testServer(b, Engines{ASR: &fakeASR{}, TTS: &fakeTTS{}}, nil)
	ct, body := multipartBody(b, wavBytes(b, 16000, 1, 3), [2]string{"model", "whisper-1"})
	client := &http.Client{}
	b.Run("transcription", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			req, _ := http.NewRequest("POST", base+"/v1/audio/transcriptions", bytes.NewReader(body))
			req.Header.Set("Content-Type", ct)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.Run("speech", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			resp, err := client.Post(base+"/v1/audio/speech", "application/json", strings.NewReader(`{"model":"tts-1","input":"one two three.","voice":"alloy","response_format":"pcm"}`))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.Run("parallel-transcription", func(b *testing.B) {
		var mu sync.Mutex
		codes := map[int]int{}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequest("POST", base+"/v1/audio/transcriptions", bytes.NewReader(body))
				req.Header.Set("Content-Type", ct)
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			}
		})
		b.ReportMetric(float64(codes[429])/float64(b.N), "rejected/op")
	})
}

// BenchmarkTranscriptionConcurrent sends b.N transcriptions from 4 clients at once (the
// server runs max_concurrent_asr = 2 of them, queues the rest): throughput and tail latency
// under load, with the queue doing its job.
func BenchmarkTranscriptionConcurrent(b *testing.B) {
	rec, id, _ := realASR(b)
	_, base := testServer(b, Engines{ASR: rec, ASRModel: id}, nil)
	ct, body := multipartBody(b, wavBytes(b, 16000, 1, 3), [2]string{"model", "whisper-1"})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	var mu sync.Mutex
	var lat []time.Duration
	codes := map[int]int{}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan struct{}, b.N)
	for i := 0; i < b.N; i++ {
		next <- struct{}{}
	}
	close(next)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				t0 := time.Now()
				req, _ := http.NewRequest("POST", base+"/v1/audio/transcriptions", bytes.NewReader(body))
				req.Header.Set("Content-Type", ct)
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				if resp.StatusCode == 200 {
					lat = append(lat, time.Since(t0))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(codes[200])/total.Seconds(), "req/s")
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(codes[429]), "rejected")
	b.ReportMetric(0, "ns/op")
}
