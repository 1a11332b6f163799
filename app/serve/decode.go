package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio"
)

// MinSampleRate is the lowest audio rate accepted anywhere (HTTP, realtime, Wyoming): below
// it, a few bytes claim hours of audio once resampled to 16 kHz (a 7 KB WAV "at 1 Hz" is an
// hour). Telephone audio (8 kHz) and the old 5.5 kHz rates pass.
const MinSampleRate = 4000

// MaxSampleRate is the highest audio rate accepted.
const MaxSampleRate = 384000

// pcmMemMax is how much decoded audio stays in memory: 30 s at 16 kHz (one recogniser
// window, and what batches); longer audio goes to a temporary file.
const pcmMemMax = int(asr.MaxSegment/1e9) * asr.SampleRate * 2

// errTooLong and errBadAudio mark decoding failures that are the upload's fault.
var (
	errTooLong  = errors.New("audio too long")
	errBadAudio = errors.New("bad audio")
)

// decoded is an upload decoded to what the recogniser hears: 16 kHz mono, 16-bit.
type decoded struct {
	pcm     *spool
	samples int64
}

func (d *decoded) Seconds() float64 { return float64(d.samples) / asr.SampleRate }

func (d *decoded) Close() { d.pcm.Close() }

// Samples returns the audio as floats (only for audio held in memory).
func (d *decoded) Samples() ([]float32, bool) {
	b, ok := d.pcm.Bytes()
	if !ok {
		return nil, false
	}
	x := make([]float32, len(b)/2)
	audio.DecodePCM(x, b, audio.S16)
	return x, true
}

// Source streams the audio.
func (d *decoded) Source() (audio.Source, error) {
	r, err := d.pcm.Reader()
	if err != nil {
		return nil, err
	}
	return audio.NewPCMReader(r, audio.Mono16k, audio.S16)
}

// decodeUpload decodes an upload, WAV directly and anything else with ffmpeg, to 16 kHz mono
// in a bounded spool. It refuses rates under MinSampleRate and audio longer than maxSeconds
// (a WAV whose header says so before anything is decoded), so the work a request brings is
// known, and bounded, before it takes a queue place.
func decodeUpload(ctx context.Context, up *spool, maxSeconds int, tmpDir string) (*decoded, error) {
	r, err := up.Reader()
	if err != nil {
		return nil, err
	}
	head := make([]byte, 12)
	n, _ := io.ReadFull(r, head)
	head = head[:n]
	if r, err = up.Reader(); err != nil {
		return nil, err
	}
	d := &decoded{pcm: newSpool(pcmMemMax, tmpDir)}
	if isWAV(head) {
		err = decodeWAV(ctx, r, d, maxSeconds)
		if errors.Is(err, audio.ErrUnsupported) {
			// a WAV of another codec (µ-law, A-law, ADPCM, RF64…): ffmpeg decodes those
			d.Close()
			d = &decoded{pcm: newSpool(pcmMemMax, tmpDir)}
			if err = decodeFFmpeg(ctx, up, d, maxSeconds); errors.Is(err, errNoFFmpeg) {
				err = fmt.Errorf("%w: this WAV's codec needs ffmpeg, which is not installed on the server (%v)", errBadAudio, err)
			}
		}
	} else {
		err = decodeFFmpeg(ctx, up, d, maxSeconds)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// errNoFFmpeg: audio that only ffmpeg decodes, and no ffmpeg.
var errNoFFmpeg = errors.New("no ffmpeg")

// checkRate refuses absurd sample rates.
func checkRate(rate int) error {
	if rate < MinSampleRate {
		return fmt.Errorf("%w: sample rate %d Hz is below %d Hz: not speech audio", errBadAudio, rate, MinSampleRate)
	}
	if rate > MaxSampleRate {
		return fmt.Errorf("%w: sample rate %d Hz is above %d Hz", errBadAudio, rate, MaxSampleRate)
	}
	return nil
}

func decodeWAV(ctx context.Context, r io.Reader, d *decoded, maxSeconds int) error {
	wr, err := audio.NewWAVReader(r)
	if err != nil {
		return fmt.Errorf("%w: %w", errBadAudio, err)
	}
	info := wr.Info()
	if err := checkRate(info.Format.SampleRate); err != nil {
		return err
	}
	if info.Frames > 0 && info.Frames > int64(maxSeconds)*int64(info.Format.SampleRate) {
		return fmt.Errorf("%w: the header says %d s", errTooLong, info.Frames/int64(info.Format.SampleRate))
	}
	src, err := audio.Convert(wr, audio.Mono16k, audio.QualityHigh)
	if err != nil {
		return fmt.Errorf("%w: %v", errBadAudio, err)
	}
	return drain(ctx, src, d, maxSeconds)
}

// drain writes a 16 kHz mono source into d as 16-bit PCM, failing past maxSeconds. (A WAV
// cut short ends early with io.EOF: what is there is transcribed.)
func drain(ctx context.Context, src audio.Source, d *decoded, maxSeconds int) error {
	buf := make([]float32, 8192)
	out := make([]byte, 0, 2*len(buf))
	limit := int64(maxSeconds) * asr.SampleRate
	for {
		n, err := src.Read(ctx, buf)
		if n > 0 {
			d.samples += int64(n)
			if d.samples > limit {
				return errTooLong
			}
			out = audio.EncodePCM(out[:0], buf[:n], audio.S16)
			if _, werr := d.pcm.Write(out); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: %v", errBadAudio, err)
		}
	}
}

func isWAV(h []byte) bool {
	return len(h) >= 12 && bytes.Equal(h[:4], []byte("RIFF")) && bytes.Equal(h[8:12], []byte("WAVE"))
}

// ffmpegRate finds an input audio stream's rate in ffmpeg's info log
// ("Stream #0:0: Audio: flac, 1 Hz, mono, s16").
var ffmpegRate = regexp.MustCompile(`Stream #0:\d+.*Audio: .*?, (\d+) Hz`)

// ffmpegLog reads ffmpeg's stderr (with level tags) as it comes: it keeps the error lines,
// and stops the decoder as soon as an input stream declares an absurd rate.
type ffmpegLog struct {
	mu      sync.Mutex
	partial []byte
	errs    strings.Builder
	rateErr error
	cancel  func()
}

func (l *ffmpegLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		l.line(line)
	}
	if len(l.partial) > 4096 {
		l.partial = l.partial[:0]
	}
	return len(p), nil
}

func (l *ffmpegLog) line(line string) {
	if m := ffmpegRate.FindStringSubmatch(line); m != nil && l.rateErr == nil {
		if rate, _ := strconv.Atoi(m[1]); checkRate(rate) != nil {
			l.rateErr = checkRate(rate)
			l.cancel()
		}
	}
	if strings.HasPrefix(line, "[error]") || strings.HasPrefix(line, "[fatal]") || strings.Contains(line, "] [error]") || strings.Contains(line, "] [fatal]") {
		if l.errs.Len() < 4096 {
			l.errs.WriteString(line)
			l.errs.WriteByte('\n')
		}
	}
}

// lastError is ffmpeg's last error line without its tags.
func (l *ffmpegLog) lastError() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := strings.TrimSpace(l.errs.String())
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[i+1:]
	}
	for _, tag := range []string{"[error] ", "[fatal] "} {
		if i := strings.Index(msg, tag); i >= 0 {
			msg = msg[i+len(tag):]
		}
	}
	return strings.TrimPrefix(msg, "pipe:0: ")
}

// decodeFFmpeg decodes any other container or codec with ffmpeg (when installed), reading
// the spooled file in place (or memory through a pipe).
func decodeFFmpeg(ctx context.Context, up *spool, d *decoded, maxSeconds int) error {
	bin, err := exec.LookPath("ffmpeg")
	if err != nil {
		return fmt.Errorf("%w: %w: not a WAV file, and ffmpeg (needed for other formats) is not installed on the server", errBadAudio, errNoFFmpeg)
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in := "pipe:0"
	if p := up.Path(); p != "" {
		in = "file:" + p
	}
	cmd := exec.CommandContext(ctx, bin, "-nostdin", "-hide_banner", "-nostats", "-loglevel", "repeat+level+info",
		"-i", in, "-vn", "-f", "s16le", "-acodec", "pcm_s16le", "-ac", "1", "-ar", "16000", "pipe:1")
	if in == "pipe:0" {
		b, _ := up.Bytes()
		cmd.Stdin = bytes.NewReader(b)
	}
	log := &ffmpegLog{cancel: cancel}
	cmd.Stderr = log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("ffmpeg: %w", err)
	}
	pr, err := audio.NewPCMReader(out, audio.Mono16k, audio.S16)
	if err != nil {
		cancel()
		cmd.Wait()
		return err
	}
	derr := drain(ctx, pr, d, maxSeconds)
	if derr != nil {
		cancel() // a reader that stopped early (too long) must not leave ffmpeg running
	}
	werr := cmd.Wait()
	log.mu.Lock()
	rateErr := log.rateErr
	log.mu.Unlock()
	switch {
	case rateErr != nil:
		return rateErr
	case parent.Err() != nil:
		return parent.Err()
	case derr != nil:
		return derr
	case werr != nil:
		msg := log.lastError()
		if msg == "" {
			msg = werr.Error()
		}
		return fmt.Errorf("%w: not audio that WAV or ffmpeg can decode (%s)", errBadAudio, msg)
	}
	return nil
}
