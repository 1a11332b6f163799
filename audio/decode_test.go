package audio

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func requireTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed (build/setup.sh installs it)", name)
		}
		t.Skipf("%s not installed", name)
	}
}

// toneBurst is 2 s at rate with a 1 kHz tone from 0.5 s to 1.5 s.
func toneBurst(rate int) *Buffer {
	b := &Buffer{Format: Format{SampleRate: rate, Channels: 1}, Data: make([]float32, 2*rate)}
	for i := rate / 2; i < 3*rate/2; i++ {
		b.Data[i] = 0.5 * float32(math.Sin(2*math.Pi*1000*float64(i)/float64(rate)))
	}
	return b
}

func onset(x []float32, rate int) float64 {
	for i, v := range x {
		if math.Abs(float64(v)) > 0.1 {
			return float64(i) / float64(rate)
		}
	}
	return -1
}

// MP3s with and without gapless information (LAME's Info tag) decode with the tone where it
// is in the original: ffmpeg alone leaves 1105 samples of priming in front of untagged files
// (69 ms at 16 kHz, 25 ms at 44.1 kHz).
func TestDecodeMP3Timing(t *testing.T) {
	requireTool(t, "ffmpeg")
	dir := t.TempDir()
	for _, rate := range []int{16000, 44100} {
		wav := filepath.Join(dir, "tone.wav")
		if err := WriteWAVFile(wav, toneBurst(rate), S16); err != nil {
			t.Fatal(err)
		}
		encodings := map[string][]string{
			"ffmpeg, tagged":   {"ffmpeg", "-loglevel", "error", "-y", "-i", wav, "-c:a", "libmp3lame", "-b:a", "64k", "OUT"},
			"ffmpeg, no tag":   {"ffmpeg", "-loglevel", "error", "-y", "-i", wav, "-c:a", "libmp3lame", "-b:a", "64k", "-write_xing", "0", "OUT"},
			"ffmpeg to a pipe": {"sh", "-c", "ffmpeg -loglevel error -i " + wav + " -c:a libmp3lame -f mp3 - | cat > OUT"},
		}
		if _, err := exec.LookPath("sox"); err == nil {
			encodings["sox"] = []string{"sox", wav, "OUT"}
		}
		for name, argv := range encodings {
			mp3 := filepath.Join(dir, "tone.mp3")
			os.Remove(mp3)
			args := append([]string(nil), argv...)
			for i, a := range args {
				args[i] = string(bytes.ReplaceAll([]byte(a), []byte("OUT"), []byte(mp3)))
			}
			if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Logf("%d Hz, %s: cannot encode: %v %s", rate, name, err, out)
				continue
			}
			data, err := os.ReadFile(mp3)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Decode(context.Background(), bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			b, err := ReadAll(context.Background(), d, 0)
			d.Close()
			if err != nil {
				t.Fatal(err)
			}
			if got := onset(b.Data, 16000); math.Abs(got-0.5) > 0.002 {
				t.Errorf("%d Hz, %s: tone starts at %.4f s, want 0.5000", rate, name, got)
			}
		}
	}
}

func TestDecodeWAVAndErrors(t *testing.T) {
	var wav bytes.Buffer
	if err := WriteWAV(&wav, toneBurst(8000), S16); err != nil {
		t.Fatal(err)
	}
	d, err := Decode(context.Background(), bytes.NewReader(wav.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if d.WAV() == nil || d.Format().SampleRate != 8000 {
		t.Errorf("WAV read as %v", d.Format())
	}
	d.Close()
	if _, err := Decode(context.Background(), bytes.NewReader(nil)); !errors.Is(err, ErrFormat) {
		t.Errorf("empty input: %v", err)
	}
	requireTool(t, "ffmpeg")
	d, err = Decode(context.Background(), bytes.NewReader([]byte("this is not audio at all, not even close")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ReadAll(context.Background(), d, 0)
	d.Close()
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("ffmpeg could not decode it")) {
		t.Errorf("garbage through ffmpeg: %v", err)
	}
}

func TestMP3Priming(t *testing.T) {
	// MPEG-2 Layer III, 64 kb/s, 16 kHz, mono: 0xFF 0xF3 (MPEG-2, layer III, no CRC),
	// bitrate index 8 (64 kb/s) << 4 | rate index 2 (16 kHz) << 2, mono.
	frame := func(tag string) []byte {
		f := make([]byte, 288) // 72 * 64000 / 16000
		copy(f, []byte{0xff, 0xf3, 8<<4 | 2<<2, 3 << 6})
		if tag != "" {
			copy(f[4+9:], "Info\x00\x00\x00\x0f")
			copy(f[4+9+8+4+4+100+4:], tag)
		}
		return f
	}
	two := func(first []byte) []byte { return append(append([]byte(nil), first...), frame("")...) }
	id3 := append([]byte("ID3\x04\x00\x00\x00\x00\x01\x00"), make([]byte, 128)...)
	cases := []struct {
		name       string
		head       []byte
		rate, want int
		ok         bool
	}{
		{"untagged", two(frame("")), 16000, 1105, true},
		{"LAME tag", two(frame("LAME3.100")), 16000, 0, true},
		{"Lavf tag", two(frame("Lavf59.27")), 16000, 0, true},
		{"other encoder's Info tag", two(frame("GOGO1.0")), 16000, 1105, true},
		{"after an ID3 tag", append(append([]byte(nil), id3...), two(frame(""))...), 16000, 1105, true},
		{"not MP3", []byte("OggS\x00\x02 this is not an mp3 at all"), 0, 0, false},
		{"ID3 running past the data", []byte("ID3\x04\x00\x00\x7f\x7f\x7f\x7f"), 0, 0, false},
	}
	for _, c := range cases {
		rate, extra, ok := mp3Priming(c.head)
		if ok != c.ok || rate != c.rate || extra != c.want {
			t.Errorf("%s: rate %d, extra %d, ok %v; want %d, %d, %v", c.name, rate, extra, ok, c.rate, c.want, c.ok)
		}
	}
}

func FuzzMP3Priming(f *testing.F) {
	f.Add([]byte{0xff, 0xf3, 0x88, 0xc0, 0, 0, 0, 0})
	f.Add(append([]byte("ID3\x04\x00\x00\x00\x00\x00\x04xxxx"), 0xff, 0xfb, 0x90, 0x64))
	f.Add([]byte("\xff\xfb\x90\x64\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00Xing\x00\x00\x00\x0f"))
	f.Fuzz(func(t *testing.T, head []byte) {
		rate, extra, ok := mp3Priming(head)
		if !ok {
			return
		}
		if rate < 8000 || rate > 48000 || extra < 0 || extra > mp3DecoderDelay+65535 {
			t.Fatalf("rate %d, extra %d", rate, extra)
		}
	})
}

// When reading stops before the end of the input (an error mid-stream), Close must not hang
// on an ffmpeg blocked writing to a pipe nobody reads any more.
func TestDecodeAbandoned(t *testing.T) {
	requireTool(t, "ffmpeg")
	path := filepath.Join(t.TempDir(), "long.flac")
	if out, err := exec.Command("ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=120",
		"-ar", "16000", path).CombinedOutput(); err != nil {
		t.Fatalf("making a FLAC file: %v: %s", err, out)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	d, err := Decode(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.Read(ctx, make([]float32, 1600)); n == 0 || err != nil {
		t.Fatalf("first read: %d samples, %v", n, err)
	}
	done := make(chan struct{})
	go func() { d.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a hang guard, not a timing
		t.Fatal("Close hangs after the reader stopped early (ffmpeg blocked on a full pipe)")
	}
}
