package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/parley-voice/parley/audio"
)

// ffmpegFormats are the speech formats ffmpeg encodes for /v1/audio/speech, with the
// encoder each needs and its arguments: OpenAI's mp3 (its default), opus in Ogg, and aac in
// ADTS, each flushed packet by packet so the audio streams as it is synthesised.
var ffmpegFormats = map[string]struct {
	encoder string
	args    []string
}{
	"mp3":  {"libmp3lame", []string{"-c:a", "libmp3lame", "-b:a", "64k", "-f", "mp3"}},
	"opus": {"libopus", []string{"-c:a", "libopus", "-b:a", "32k", "-ar", "24000", "-application", "voip", "-page_duration", "20000", "-f", "ogg"}},
	"aac":  {"aac", []string{"-c:a", "aac", "-b:a", "64k", "-f", "adts"}},
}

var ffmpegEncoders struct {
	once sync.Once
	have map[string]bool // format → its encoder is there
}

// encodable reports which of the ffmpeg formats the installed ffmpeg can make (none
// without ffmpeg). It asks ffmpeg once.
func encodable() map[string]bool {
	ffmpegEncoders.once.Do(func() {
		ffmpegEncoders.have = map[string]bool{}
		bin, err := exec.LookPath("ffmpeg")
		if err != nil {
			return
		}
		out, err := exec.Command(bin, "-hide_banner", "-encoders").Output()
		if err != nil {
			return
		}
		for f, e := range ffmpegFormats {
			for _, line := range strings.Split(string(out), "\n") {
				if fs := strings.Fields(line); len(fs) >= 2 && fs[1] == e.encoder {
					ffmpegEncoders.have[f] = true
				}
			}
		}
	})
	return ffmpegEncoders.have
}

// ffmpegEncoder pipes 16-bit PCM through ffmpeg and hands what comes out to emit as it
// comes, from its own goroutine.
type ffmpegEncoder struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	done   chan error
	cancel context.CancelFunc
	log    *ffmpegLog
	buf    []byte
}

func newFFmpegEncoder(ctx context.Context, format string, rate int, emit func([]byte) error) (*ffmpegEncoder, error) {
	spec, ok := ffmpegFormats[format]
	if !ok || !encodable()[format] {
		return nil, fmt.Errorf("this server's ffmpeg cannot encode %s", format)
	}
	ctx, cancel := context.WithCancel(ctx)
	// no probing of the input: ffmpeg would otherwise wait for 5 s of audio before the first
	// packet out
	args := []string{"-hide_banner", "-loglevel", "repeat+level+error", "-probesize", "32", "-analyzeduration", "0", "-fflags", "nobuffer",
		"-f", "s16le", "-ar", strconv.Itoa(rate), "-ac", "1", "-i", "pipe:0"}
	args = append(args, spec.args...)
	args = append(args, "-flush_packets", "1", "pipe:1")
	cmd := exec.CommandContext(ctx, "ffmpeg", args...)
	e := &ffmpegEncoder{cmd: cmd, done: make(chan error, 1), cancel: cancel, log: &ffmpegLog{cancel: func() {}}}
	cmd.Stderr = e.log
	var err error
	if e.stdin, err = cmd.StdinPipe(); err != nil {
		cancel()
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("ffmpeg: %w", err)
	}
	go func() {
		b := make([]byte, 16<<10)
		for {
			n, rerr := out.Read(b)
			if n > 0 {
				if err := emit(b[:n]); err != nil {
					cancel() // the client is gone: stop the encoder, and with it the synthesis
					io.Copy(io.Discard, out)
					e.done <- err
					return
				}
			}
			if rerr != nil {
				e.done <- nil
				return
			}
		}
	}()
	return e, nil
}

// Write encodes samples.
func (e *ffmpegEncoder) Write(samples []float32) error {
	e.buf = audio.EncodePCM(e.buf[:0], samples, audio.S16)
	if _, err := e.stdin.Write(e.buf); err != nil {
		select {
		case cerr := <-e.done: // the copier failed first: that is the cause
			e.done <- cerr
			if cerr != nil {
				return cerr
			}
		default:
		}
		return fmt.Errorf("ffmpeg encoder: %w", err)
	}
	return nil
}

// Close ends the input, waits for the last encoded bytes to be sent and for ffmpeg to exit.
func (e *ffmpegEncoder) Close() error {
	defer e.cancel()
	e.stdin.Close()
	cerr := <-e.done
	werr := e.cmd.Wait()
	switch {
	case cerr != nil:
		return cerr
	case werr != nil:
		msg := e.log.lastError()
		if msg == "" {
			msg = werr.Error()
		}
		return errors.New("ffmpeg encoder: " + msg)
	}
	return nil
}
