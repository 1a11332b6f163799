package audio

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// ErrNoFFmpeg means a file that is not WAV needs ffmpeg, and it is not installed.
var ErrNoFFmpeg = errors.New("not a WAV file, and ffmpeg (needed for other formats) is not installed: install ffmpeg (apt-get install ffmpeg) or convert to WAV first")

// Decoded is audio from a file of any format, read as a Source: WAV directly in its own
// format, anything else decoded by ffmpeg to 16 kHz mono. Close it when done.
type Decoded struct {
	Source
	wav  *WAVReader
	ff   *ffmpegStream
	skip int // samples still to drop from the front (MP3 priming ffmpeg leaves in)
}

// mp3Head is how much of a file is kept in memory to find its first MP3 frame (after any
// ID3 tag, which may hold cover art).
const mp3Head = 64 << 10

// Decode opens r, which is read to its end. WAV files of any layout are read directly (a
// damaged one as far as it goes: see Warning); other formats go through ffmpeg, and MP3s
// without gapless information lose the priming ffmpeg leaves in front of them, so times
// measured in the audio are the file's own.
func Decode(ctx context.Context, r io.Reader) (*Decoded, error) {
	br := bufio.NewReaderSize(r, mp3Head)
	head, _ := br.Peek(12)
	if len(head) == 0 {
		return nil, fmt.Errorf("%w: empty input", ErrFormat)
	}
	if isWAV(head) {
		wr, err := NewWAVReader(br)
		if err != nil {
			return nil, err
		}
		return &Decoded{Source: wr, wav: wr}, nil
	}
	head, _ = br.Peek(mp3Head)
	var in io.Reader = br
	if len(head) >= 10 && string(head[:3]) == "ID3" {
		// A large tag: keep it and the first frame in memory to look past it.
		size := int(head[6]&0x7f)<<21 | int(head[7]&0x7f)<<14 | int(head[8]&0x7f)<<7 | int(head[9]&0x7f)
		if want := 10 + size + 8<<10; want > len(head) && want <= 16<<20 {
			buf := make([]byte, want)
			n, _ := io.ReadFull(br, buf)
			head = buf[:n]
			in = io.MultiReader(bytes.NewReader(head), br)
		}
	}
	d := &Decoded{}
	rate, extra, isMP3 := mp3Priming(head)
	ff, err := startFFmpeg(ctx, in)
	if err != nil {
		return nil, err
	}
	d.Source, d.ff = ff, ff
	if isMP3 && extra > 0 {
		d.skip = (extra*Mono16k.SampleRate + rate/2) / rate
	}
	return d, nil
}

func isWAV(h []byte) bool {
	return len(h) >= 12 && (string(h[:4]) == "RIFF" || string(h[:4]) == "RF64") && string(h[8:12]) == "WAVE"
}

// Read implements Source.
func (d *Decoded) Read(ctx context.Context, p []float32) (int, error) {
	for d.skip > 0 {
		n, err := d.Source.Read(ctx, p[:min(len(p), d.skip)])
		d.skip -= n
		if err != nil {
			return 0, err
		}
	}
	return d.Source.Read(ctx, p)
}

// WAV returns the WAV reader when the input is a WAV file, for its header details.
func (d *Decoded) WAV() *WAVReader { return d.wav }

// Warning reports damage worked around in a WAV file once it has been read (see
// WAVReader.Warning); nil otherwise.
func (d *Decoded) Warning() error {
	if d.wav != nil {
		return d.wav.Warning()
	}
	return nil
}

// Close stops ffmpeg if it is still running. It returns ffmpeg's failure, if any.
func (d *Decoded) Close() error {
	if d.ff != nil {
		return d.ff.close()
	}
	return nil
}

// ffmpegStream is ffmpeg decoding to 16 kHz mono 16-bit PCM on a pipe. At the end of the
// stream it reports ffmpeg's failure (not a clean EOF) when it could not decode the input.
type ffmpegStream struct {
	*PCMReader
	cmd    *exec.Cmd
	stderr *limitedBuffer
	done   bool
	err    error
}

func startFFmpeg(ctx context.Context, in io.Reader) (*ffmpegStream, error) {
	bin, err := exec.LookPath("ffmpeg")
	if err != nil {
		return nil, ErrNoFFmpeg
	}
	cmd := exec.CommandContext(ctx, bin, "-nostdin", "-hide_banner", "-loglevel", "error",
		"-i", "pipe:0", "-vn", "-f", "s16le", "-acodec", "pcm_s16le", "-ac", "1", "-ar", "16000", "pipe:1")
	cmd.Stdin = in
	stderr := &limitedBuffer{max: 4096}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ffmpeg: %w", err)
	}
	pr, err := NewPCMReader(out, Mono16k, S16)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	return &ffmpegStream{PCMReader: pr, cmd: cmd, stderr: stderr}, nil
}

func (s *ffmpegStream) Read(ctx context.Context, p []float32) (int, error) {
	n, err := s.PCMReader.Read(ctx, p)
	if errors.Is(err, io.EOF) {
		if werr := s.finish(); werr != nil {
			return n, werr
		}
	}
	return n, err
}

func (s *ffmpegStream) finish() error {
	if s.done {
		return s.err
	}
	s.done = true
	if err := s.cmd.Wait(); err != nil {
		msg := strings.TrimSpace(s.stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		s.err = fmt.Errorf("ffmpeg could not decode it: %s", msg)
	}
	return s.err
}

func (s *ffmpegStream) close() error {
	if !s.done {
		// stopped before the end (an error mid-stream): ffmpeg may be blocked writing to a
		// pipe nobody reads, and Wait would never return
		s.cmd.Process.Kill()
	}
	return s.finish()
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	b   bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return l.b.String() }
