package serve

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/parley-voice/parley/app/config"
)

// peersDir is where build/setup.sh installs the npm test peers (build/peers), the official
// openai client among them; as llm/internal/peer finds it ($PARLEY_PEERS overrides).
func peersDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PARLEY_PEERS")
	if dir == "" {
		cache := os.Getenv("PARLEY_CACHE")
		if cache == "" {
			if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
				cache = filepath.Join(x, "parley")
			} else if h, err := os.UserHomeDir(); err == nil {
				cache = filepath.Join(h, ".cache", "parley")
			}
		}
		dir = filepath.Join(cache, "peers", "current")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		t.Skipf("the openai npm client is not installed in %s (build/setup.sh peers installs it)", dir)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH")
	}
	return dir
}

const openAIClientScript = `
import OpenAI, { toFile } from 'openai';
import fs from 'node:fs';
const [base, outdir] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'sekrit', maxRetries: 0, timeout: 60000 });
const out = { speech: {} };
for (const fmt of ['mp3', 'opus']) {
  const r = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'One two three. Four five.', response_format: fmt });
  const buf = Buffer.from(await r.arrayBuffer());
  fs.writeFileSync(outdir + '/speech.' + fmt, buf);
  out.speech[fmt] = { bytes: buf.length, type: r.headers.get('content-type') };
}
const d = await client.audio.speech.create({ model: 'gpt-4o-mini-tts', voice: 'nova', input: 'Hello.' });
out.defaultType = d.headers.get('content-type');
const tr = await client.audio.transcriptions.create({ model: 'gpt-4o-transcribe',
  file: await toFile(fs.readFileSync(outdir + '/speech.mp3'), 'speech.mp3') });
out.transcript = tr.text;
out.models = (await client.models.list()).data.map((m) => m.id);
try {
  await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
  out.chat = 'answered';
} catch (e) {
  out.chat = { status: e.status, code: e.code, type: e.type };
}
console.log(JSON.stringify(out));
`

// The official openai Node client (npm) fetches mp3 and opus speech that ffmpeg decodes,
// transcribes the mp3 back, lists the models and reads a 404 in OpenAI's shape.
func TestOpenAINodeClient(t *testing.T) {
	dir := peersDir(t)
	if !encodable()["mp3"] || !encodable()["opus"] {
		t.Skip("ffmpeg with libmp3lame and libopus is not installed")
	}
	_, base := testServer(t, Engines{ASR: &fakeASR{}, TTS: &fakeTTS{}}, func(o *Options) { o.Config.APIKey = "sekrit" })
	script, err := os.CreateTemp(dir, ".serve-openai-*.mjs") // resolves 'openai' from dir's node_modules
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(script.Name())
	script.WriteString(openAIClientScript)
	script.Close()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script.Name(), base, out)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, b)
	}
	var got struct {
		Speech map[string]struct {
			Bytes int
			Type  string
		}
		DefaultType string
		Transcript  string
		Models      []string
		Chat        struct {
			Status int
			Code   string
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	t.Logf("%s", b)
	for format, ctype := range map[string]string{"mp3": "audio/mpeg", "opus": "audio/ogg"} {
		if got.Speech[format].Type != ctype {
			t.Errorf("%s: content type %q", format, got.Speech[format].Type)
		}
		data, err := os.ReadFile(filepath.Join(out, "speech."+format))
		if err != nil {
			t.Fatal(err)
		}
		dec := pcm16(ffmpegDecodeS16At(t, data, SpeechRate))
		var e float64
		for _, v := range dec {
			e += float64(v) * float64(v)
		}
		secs, rms := float64(len(dec))/SpeechRate, math.Sqrt(e/float64(max(1, len(dec))))/32768
		if secs < 0.45 || secs > 0.65 || rms < 0.15 || rms > 0.3 {
			t.Errorf("%s from the client decodes to %.3f s at RMS %.3f, want the 0.5 s tone at 0.21", format, secs, rms)
		}
	}
	if got.DefaultType != "audio/mpeg" {
		t.Errorf("no response_format gave %q, OpenAI's default is mp3", got.DefaultType)
	}
	if got.Transcript != "hello world" {
		t.Errorf("transcript %q", got.Transcript)
	}
	if !slices.Contains(got.Models, "whisper-1") || !slices.Contains(got.Models, "tts-1") || slices.Contains(got.Models, "alloy") {
		t.Errorf("models %v", got.Models)
	}
	if got.Chat.Status != 404 || got.Chat.Code != "model_not_found" {
		t.Errorf("chat with an unknown model: %+v", got.Chat)
	}
}

const openAIShutdownScript = `
import OpenAI from 'openai';
const [base] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'x', maxRetries: 0, timeout: 60000 });
const input = 'This sentence takes a while. '.repeat(40);
const speak = () => client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input, response_format: 'pcm' });
const out = { queued: [] };
const first = await speak(); // its headers: it runs
const queued = [speak(), speak()].map((p) => p.then(
  () => ({ status: 200 }),
  (e) => ({ status: e.status, code: e.code, retryAfter: e.headers?.get?.('retry-after') ?? e.headers?.['retry-after'] ?? null })));
let bytes = 0;
try {
  const reader = first.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.length;
  }
  out.stream = { bytes, error: null };
} catch (e) {
  out.stream = { bytes, error: String(e) };
}
out.queued = await Promise.all(queued);
console.log(JSON.stringify(out));
`

// The official client at shutdown: requests queued behind a long answer get a 503 it reads
// as an APIError with code server_shutting_down and a Retry-After; the stream cut at the
// drain's end is an error it raises, not a short success.
func TestOpenAINodeClientAtShutdown(t *testing.T) {
	dir := peersDir(t)
	o := Options{Config: config.Default().Serve, Engines: Engines{TTS: &fakeTTS{pace: 200 * time.Millisecond}}, DrainTimeout: 3 * time.Second}
	o.Config.MaxConcurrentTTS = 1
	s, addr, stop, served := runServer(t, o)
	script, err := os.CreateTemp(dir, ".serve-openai-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(script.Name())
	script.WriteString(openAIShutdownScript)
	script.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script.Name(), "http://"+addr)
	cmd.Dir = dir
	type result struct {
		out []byte
		err error
	}
	ran := make(chan result, 1)
	go func() { b, err := cmd.CombinedOutput(); ran <- result{b, err} }()
	for deadline := time.Now().Add(time.Minute); s.ttsLim.Running() != 1 || s.ttsLim.Waiting() != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client's requests never queued")
		}
	}
	stop()
	r := <-ran
	if r.err != nil {
		t.Fatalf("node: %v\n%s", r.err, r.out)
	}
	t.Logf("%s", r.out)
	var got struct {
		Queued []struct {
			Status     int
			Code       string
			RetryAfter *string
		}
		Stream struct {
			Bytes int
			Error *string
		}
	}
	if err := json.Unmarshal(r.out, &got); err != nil {
		t.Fatalf("%v: %s", err, r.out)
	}
	for i, q := range got.Queued {
		if q.Status != 503 || q.Code != "server_shutting_down" || q.RetryAfter == nil || *q.RetryAfter == "" {
			t.Errorf("queued request %d: %+v", i, q)
		}
	}
	if got.Stream.Bytes == 0 || got.Stream.Error == nil {
		t.Errorf("the cut stream: %d bytes, error %v (want audio, then an error)", got.Stream.Bytes, got.Stream.Error)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
