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
