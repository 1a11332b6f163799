package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/engines"
)

func init() {
	register(&command{
		name:  "say",
		usage: "say [flags] TEXT…|-  speak text (ChatTTS/CosyVoice/SSML controls) aloud or into a file",
		run:   runSay,
	})
}

const sayUsage = `usage: parley say [flags] TEXT…|-

Speaks TEXT ("-" reads standard input) on the default output device, or writes it to a file
with -o. TEXT may hold inline controls:
  ChatTTS    [uv_break] [v_break] [lbreak] [laugh] [oral_0-9] [laugh_0-2] [break_0-7] [speed_0-9]
  CosyVoice  [laughter] [breath] [cough] [sigh] <strong>…</strong> <laughter>…</laughter>
  SSML       <speak> <break time="300ms"/> <break strength="strong"/> <prosody rate="slow">…</prosody>
Controls an engine cannot honour are reported on standard error, never read aloud.
--voice takes a library voice (parley voices list) or an engine preset (espeak: en-us+f3;
kokoro: af_heart; chattts: seed:N, none, or a ChatTTS speaker string). --engine auto (the
default) is ChatTTS when a ChatTTS export is installed, else espeak-ng.`

// sayFlags are the synthesis flags shared by say and voices preview.
type sayFlags struct {
	engine, voice, lang, model string
	precision                  string
	seed                       int64
	temp, topP, speed          float64
	topK                       int
}

func (f *sayFlags) register(fs *flag.FlagSet, env *cliEnv) {
	f.engine, f.speed = "espeak", 1
	if c := env.Config; c != nil {
		f.engine, f.voice, f.seed = c.TTS.Engine, c.TTS.Voice, c.TTS.Seed
		f.temp, f.topP, f.topK, f.speed = c.TTS.Temperature, c.TTS.TopP, c.TTS.TopK, c.TTS.Speed
	}
	fs.StringVar(&f.engine, "engine", f.engine, "engine: "+strings.Join(engines.Names, " | "))
	fs.StringVar(&f.voice, "voice", f.voice, "library voice or engine preset")
	fs.Int64Var(&f.seed, "seed", f.seed, "voice seed (0 = none): the same seed gives the same voice")
	fs.Float64Var(&f.temp, "temperature", f.temp, "liveliness / sampling temperature 0..2")
	fs.Float64Var(&f.topP, "top-p", f.topP, "nucleus sampling 0..1 (sampling engines)")
	fs.IntVar(&f.topK, "top-k", f.topK, "top-k sampling (sampling engines)")
	fs.Float64Var(&f.speed, "speed", f.speed, "speed factor 0.25..4")
	fs.StringVar(&f.lang, "lang", "", "language (en, en-gb, zh, fr, …); default: the voice's, else English")
	fs.StringVar(&f.model, "model", "", "model directory for ONNX engines (default: installed model)")
	fs.StringVar(&f.precision, "precision", "", "ChatTTS's GPT weights: auto | fp32 | int8 (default: tts.precision)")
}

// request builds the engine and the request (with the library voice applied). Sampling
// knobs the engine ignores are left out unless given on the command line: top-p and top-k
// mean nothing to espeak-ng, and saying so on every call for the config's values is noise.
func (f *sayFlags) request(fs *flag.FlagSet, env *cliEnv, text string) (tts.Engine, tts.Request, error) {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	req := tts.Request{Text: text, Temperature: f.temp, TopP: f.topP, TopK: f.topK, Speed: f.speed, Language: f.lang}
	if f.seed != 0 {
		req.Seed, req.HasSeed = f.seed, true
	}
	fac := env.factory()
	v, err := fac.LibraryVoice(f.voice)
	if err != nil {
		return nil, req, err
	}
	if v != nil && !set["engine"] {
		f.engine = v.Engine // a library voice brings its engine
	}
	eng, err := fac.Voice(factory.Voice{Engine: f.engine, Model: f.model, Precision: f.precision})
	if err != nil {
		return nil, req, err
	}
	if v != nil {
		req, err = engines.ApplyVoice(req, v, f.engine, engines.Explicit{
			Temperature: set["temperature"], TopP: set["top-p"], TopK: set["top-k"], Speed: set["speed"], Language: set["lang"], Seed: set["seed"]})
		if err != nil {
			eng.Close()
			return nil, req, err
		}
	} else {
		req.Voice = f.voice
	}
	caps := eng.Capabilities()
	for _, k := range []struct {
		flag string
		ctl  tts.Control
		zero func()
	}{
		{"top-p", tts.CtlTopP, func() { req.TopP = 0 }},
		{"top-k", tts.CtlTopK, func() { req.TopK = 0 }},
		{"temperature", tts.CtlTemperature, func() { req.Temperature = 0 }},
	} {
		if !set[k.flag] && caps.Support(k.ctl) == tts.Ignored {
			k.zero()
		}
	}
	return eng, req, nil
}

func runSay(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "say", sayUsage)
	var sf sayFlags
	sf.register(fs.FlagSet, env)
	out := fs.String("o", "", "write audio to this file (.wav, .pcm = s16le, .f32) or - for WAV on stdout; default: play")
	format := fs.String("format", "", "output format for -o: wav | pcm | f32 (default from the file name)")
	rate := fs.Int("rate", 0, "output sample rate in Hz (default: the engine's; the device's when playing)")
	caps := fs.Bool("capabilities", false, "print the engine's capabilities (native/emulated/ignored per control) as JSON and exit")
	verbose := fs.Bool("v", false, "print time to first audio and real-time factor")
	if err := fs.parse(args); err != nil {
		return err
	}
	text := strings.Join(fs.Args(), " ")
	if text == "-" {
		b, err := io.ReadAll(io.LimitReader(env.Stdin, tts.MaxTextBytes+1))
		if err != nil {
			return fmt.Errorf("say: reading standard input: %w", err)
		}
		text = string(b)
	}
	if *caps {
		text = "x"
	}
	if strings.TrimSpace(text) == "" {
		return usageError("say", "no text (give TEXT or - for standard input)")
	}
	eng, req, err := sf.request(fs.FlagSet, env, text)
	if err != nil {
		return err
	}
	defer eng.Close()
	if *caps {
		b, _ := json.MarshalIndent(eng.Capabilities(), "", "  ")
		fmt.Fprintln(env.Stdout, string(b))
		return nil
	}
	req.SampleRate = *rate
	if *out != "" {
		f := tts.OutputFormat(*format)
		if f == "" {
			if f, err = formatFor(*out); err != nil {
				return err
			}
		}
		req.Format = f
	}
	start := time.Now()
	stream, err := eng.Synthesize(ctx, req)
	if err != nil {
		return err
	}
	defer stream.Close()
	var stats sayStats
	if *out != "" {
		err = sayToFile(ctx, stream, *out, req.Format, &stats)
	} else {
		err = sayToDevice(ctx, env, stream, eng.Capabilities().SampleRate, &stats)
	}
	for _, w := range stream.Warnings() {
		fmt.Fprintln(env.Stderr, "parley say: warning:", w)
	}
	if err != nil {
		return err
	}
	if *verbose && stats.samples > 0 {
		dur := time.Duration(float64(stats.samples) / float64(stats.rate) * float64(time.Second))
		elapsed := stats.synth
		fmt.Fprintf(env.Stderr, "parley say: %s of audio; first audio after %s; synthesis %s (RTF %.3f)\n",
			dur.Round(time.Millisecond), stats.first.Sub(start).Round(time.Millisecond), elapsed.Round(time.Millisecond), elapsed.Seconds()/dur.Seconds())
	}
	return nil
}

type sayStats struct {
	first   time.Time
	synth   time.Duration // time spent waiting for the engine
	samples int
	rate    int
}

func (s *sayStats) next(ctx context.Context, st tts.Stream) (tts.Chunk, error) {
	t := time.Now()
	c, err := st.Next(ctx)
	s.synth += time.Since(t)
	if err == nil {
		if s.first.IsZero() {
			s.first = time.Now()
		}
		s.samples += len(c.Samples)
		s.rate = c.SampleRate
	}
	return c, err
}

// formatFor picks the output format from the file name; a name that promises an encoding
// say cannot write (out.mp3) is an error rather than WAV bytes under that name.
func formatFor(path string) (tts.OutputFormat, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".pcm", ".raw", ".s16":
		return tts.FormatPCM, nil
	case ".f32":
		return tts.FormatF32, nil
	case "", ".wav", ".wave":
		return tts.FormatWAV, nil
	default:
		return "", fmt.Errorf("%w: -o %s: say writes WAV (.wav), raw 16-bit PCM (.pcm, .raw, .s16) or float32 (.f32), not %s; give -format wav|pcm|f32 to choose", errUsage, path, ext)
	}
}

// sayToFile streams chunks into a file as they arrive (a WAV header with real sizes once done
// when the file is seekable).
func sayToFile(ctx context.Context, st tts.Stream, path string, f tts.OutputFormat, stats *sayStats) error {
	var w io.Writer
	var file *os.File
	if path == "-" {
		w = os.Stdout
	} else {
		var err error
		file, err = os.Create(path)
		if err != nil {
			return err
		}
		defer file.Close()
		w = file
	}
	var wav *audio.WAVWriter
	var buf []byte
	for {
		c, err := stats.next(ctx, st)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch f {
		case tts.FormatWAV:
			if wav == nil {
				wav, err = audio.NewWAVWriter(w, audio.Format{SampleRate: c.SampleRate, Channels: 1}, audio.S16)
				if err != nil {
					return err
				}
			}
			if _, err := wav.Write(ctx, c.Samples); err != nil {
				return err
			}
		case tts.FormatPCM:
			buf = audio.EncodePCM(buf[:0], c.Samples, audio.S16)
			if _, err := w.Write(buf); err != nil {
				return err
			}
		case tts.FormatF32:
			buf = audio.EncodePCM(buf[:0], c.Samples, audio.F32)
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
	}
	if wav != nil {
		if err := wav.Close(); err != nil {
			return err
		}
	}
	if file != nil {
		return file.Close()
	}
	return nil
}

// sayToDevice plays chunks on the default output device as they arrive.
func sayToDevice(ctx context.Context, env *cliEnv, st tts.Stream, rate int, stats *sayStats) error {
	host, err := device.Open(env.Log)
	if err != nil {
		return fmt.Errorf("no audio output (use -o FILE to write a file): %w", err)
	}
	defer host.Close()
	pb, err := host.OpenPlayback(device.PlaybackConfig{Format: audio.Format{SampleRate: rate, Channels: 1}, Echo: -1})
	if err != nil {
		return fmt.Errorf("no audio output (use -o FILE to write a file): %w", err)
	}
	defer pb.Close()
	for {
		c, err := stats.next(ctx, st)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			pb.Stop()
			return err
		}
		if c.SampleRate != rate {
			c.Samples, err = audio.Resample(c.Samples, c.SampleRate, rate, 1)
			if err != nil {
				return err
			}
		}
		if _, err := pb.Write(ctx, c.Samples); err != nil {
			pb.Stop()
			return err
		}
	}
	return pb.Drain(ctx)
}
