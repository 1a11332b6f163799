package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/tts/kokoro"
	"github.com/parley-voice/parley/voices"
)

func init() {
	register(&command{
		name:  "voices",
		usage: "voices list|show|create|mix|export|import|rm|preview|compare|clone|seeds  manage the voice library",
		run:   runVoices,
	})
}

const voicesUsage = `usage: parley voices COMMAND [flags] [args]

The voice library lives in %s (one JSON file per voice).

  list                                   all voices (bad files are reported, not hidden)
  show NAME [--speaker [--chattts]]      a voice as JSON (--speaker: its embedding as a speaker
                                         string, Parley's spk1: or ChatTTS's base16384 form)
  create NAME --engine E (--preset P | --seed N | --embedding FILE | --speaker STR | --freeze-seed N)
         [--temperature T --top-p P --top-k K --speed S --lang L --description D] [--force]
                                         --embedding reads .npy or raw float32 .bin; --freeze-seed
                                         stores the style a Kokoro audio seed gives as an embedding
  mix NAME --engine E VOICE=WEIGHT…       a weighted blend of presets or library voices
  export NAME [-o FILE]                  write the voice file (stdout by default)
  import FILE|- [--name N] [--force]     add a voice file (validated like any other)
  rm NAME                                delete a voice
  preview NAME [-o out.wav] [--text T]   speak the preview sentence with the voice
  compare A B [--model M] [--json]       how alike the voices of two recordings are (speaker
                                         embeddings' cosine similarity)
  clone CLIP [--text T] [--name N]       a ChatTTS voice from 3–10 s of someone speaking: the
                                         clip's transcript and audio codes become its prompt
  seeds [--from N --to M | --suggested]  how ChatTTS seed speakers sound: pitch, voicing (whispers);
        [--json [--speaker]]             --suggested: the model's suggested seeds
`

func runVoices(ctx context.Context, env *cliEnv, args []string) error {
	usage := func() { fmt.Fprintf(env.Stderr, voicesUsage, voices.DefaultDir()) }
	if helpRequested(env, args, fmt.Sprintf(voicesUsage, voices.DefaultDir())) {
		return nil
	}
	if len(args) == 0 {
		usage()
		return usageError("voices", "missing command")
	}
	if args[0] == "compare" {
		return voicesCompare(ctx, env, args[1:])
	}
	if args[0] == "clone" {
		return voicesClone(ctx, env, args[1:])
	}
	if args[0] == "seeds" {
		return voicesSeeds(ctx, env, args[1:])
	}
	lib, err := voices.Open(voices.DefaultDir())
	if err != nil {
		return err
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "list", "ls":
		return voicesList(env, lib)
	case "show":
		return voicesShow(env, lib, rest)
	case "create":
		return voicesCreate(env, lib, rest)
	case "mix":
		return voicesMix(env, lib, rest)
	case "export":
		return voicesExport(env, lib, rest)
	case "import":
		return voicesImport(env, lib, rest)
	case "rm", "remove", "delete":
		if len(rest) != 1 {
			return errors.New("voices rm: give one NAME")
		}
		if err := lib.Remove(rest[0]); err != nil {
			return err
		}
		fmt.Fprintln(env.Stdout, "removed", rest[0])
		return nil
	case "preview":
		return voicesPreview(ctx, env, rest)
	}
	usage()
	return fmt.Errorf("voices: unknown command %q", cmd)
}

// voiceArgs parses flags that may come before or after positional arguments.
func voiceArgs(fs *cmdFlags, args []string) ([]string, error) {
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	return fs.Args(), nil
}

func voicesList(env *cliEnv, lib *voices.Library) error {
	vs, errs := lib.List()
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tENGINE\tKIND\tVOICE\tDESCRIPTION")
	for _, v := range vs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Name, v.Engine, v.Kind, detail(v), v.Description)
	}
	tw.Flush()
	if len(vs) == 0 {
		fmt.Fprintf(env.Stderr, "no voices yet in %s; try: parley voices create warm --engine espeak --seed 42\n", lib.Dir())
	}
	for _, e := range errs {
		fmt.Fprintln(env.Stderr, "parley voices: skipped:", e)
	}
	return nil
}

func detail(v *voices.Voice) string {
	switch v.Kind {
	case voices.KindPreset:
		return v.Preset
	case voices.KindSeed:
		return "seed " + strconv.FormatInt(*v.Seed, 10)
	case voices.KindEmbedding:
		return fmt.Sprintf("%d×%d embedding", max(v.Embedding.Rows, 1), v.Embedding.Dim)
	case voices.KindMix:
		var p []string
		for _, m := range v.Mix {
			p = append(p, fmt.Sprintf("%s=%g", m.Voice, m.Weight))
		}
		return strings.Join(p, " ")
	}
	return ""
}

func voicesShow(env *cliEnv, lib *voices.Library, args []string) error {
	fs := newFlags(env, "voices show", "")
	speaker := fs.Bool("speaker", false, "print the embedding as a speaker string")
	chattts := fs.Bool("chattts", false, "with --speaker: in ChatTTS's format (what its infer() takes as spk_emb)")
	pos, err := voiceArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("voices show: give one NAME")
	}
	v, err := lib.Get(pos[0])
	if err != nil {
		return err
	}
	if *speaker {
		if v.Embedding == nil {
			return fmt.Errorf("voices show: %s has no embedding", v.Name)
		}
		if *chattts {
			s, err := voices.EncodeChatTTSSpeaker(v.Embedding.Data)
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Stdout, s)
			return nil
		}
		fmt.Fprintln(env.Stdout, voices.EncodeSpeaker(v.Embedding.Data))
		return nil
	}
	b, err := v.Marshal()
	if err != nil {
		return err
	}
	_, err = env.Stdout.Write(b)
	return err
}

type defaultFlags struct {
	temp, topP, speed *float64
	topK              *int
	lang, desc        *string
	force             *bool
}

func addDefaultFlags(fs *flag.FlagSet) defaultFlags {
	return defaultFlags{
		temp:  fs.Float64("temperature", 0, "default temperature"),
		topP:  fs.Float64("top-p", 0, "default top-p"),
		topK:  fs.Int("top-k", 0, "default top-k"),
		speed: fs.Float64("speed", 0, "default speed"),
		lang:  fs.String("lang", "", "default language"),
		desc:  fs.String("description", "", "one-line description"),
		force: fs.Bool("force", false, "replace an existing voice"),
	}
}

func (d defaultFlags) apply(v *voices.Voice) {
	v.Defaults = voices.Defaults{Temperature: *d.temp, TopP: *d.topP, TopK: *d.topK, Speed: *d.speed, Language: *d.lang}
	v.Description = *d.desc
}

func voicesCreate(env *cliEnv, lib *voices.Library, args []string) error {
	fs := newFlags(env, "voices create", "")
	engine := fs.String("engine", "espeak", "engine the voice is for: espeak | kokoro | chattts")
	preset := fs.String("preset", "", "engine preset (espeak: en-us+f3; kokoro: af_heart)")
	seed := fs.String("seed", "", "voice seed")
	embFile := fs.String("embedding", "", "embedding file: .npy or raw float32 .bin")
	speaker := fs.String("speaker", "", "embedding as a speaker string (Parley spk1:… or a ChatTTS speaker string)")
	freeze := fs.String("freeze-seed", "", "kokoro: store the style this audio seed gives, as an embedding")
	model := fs.String("model", "", "kokoro model directory for --freeze-seed (default: installed)")
	d := addDefaultFlags(fs.FlagSet)
	pos, err := voiceArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("voices create: give one NAME")
	}
	name := pos[0]
	n := 0
	for _, s := range []string{*preset, *seed, *embFile, *speaker, *freeze} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return errors.New("voices create: give exactly one of --preset, --seed, --embedding, --speaker, --freeze-seed")
	}
	var v *voices.Voice
	switch {
	case *preset != "":
		v = voices.New(name, *engine, voices.KindPreset)
		v.Preset = *preset
	case *seed != "":
		s, err := strconv.ParseInt(*seed, 10, 64)
		if err != nil {
			return fmt.Errorf("voices create: --seed %q is not an integer", *seed)
		}
		v = voices.New(name, *engine, voices.KindSeed)
		v.Seed = &s
	case *speaker != "":
		data, err := voices.DecodeAnySpeaker(*speaker)
		if err != nil {
			return err
		}
		v = embeddingVoice(name, *engine, data)
	case *embFile != "":
		data, err := readEmbedding(*embFile)
		if err != nil {
			return err
		}
		v = embeddingVoice(name, *engine, data)
	case *freeze != "":
		s, err := strconv.ParseInt(*freeze, 10, 64)
		if err != nil {
			return fmt.Errorf("voices create: --freeze-seed %q is not an integer", *freeze)
		}
		dir := *model
		if dir == "" {
			dir = findKokoroDir()
		}
		packs, err := kokoro.LoadPacks(dir)
		if err != nil {
			return err
		}
		st, err := kokoro.ComputeStats(packs)
		if err != nil {
			return err
		}
		p := st.Sample(s)
		v = embeddingVoice(name, "kokoro", p.Data)
	}
	d.apply(v)
	if err := lib.Save(v, *d.force); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "created %s (%s %s voice)\n", v.Name, v.Engine, v.Kind)
	return nil
}

func embeddingVoice(name, engine string, data []float32) *voices.Voice {
	v := voices.New(name, engine, voices.KindEmbedding)
	dim, _ := voices.EngineDim(engine)
	rows := 1
	if dim > 0 && len(data) > dim && len(data)%dim == 0 {
		rows = len(data) / dim
	}
	if dim <= 0 { // no fixed size (ChatTTS: the model's): one row
		dim = len(data)
	}
	v.Embedding = &voices.Embedding{Dim: dim, Rows: rows, Data: data}
	return v
}

func readEmbedding(path string) ([]float32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > voices.MaxFileBytes {
		return nil, fmt.Errorf("%s: %d bytes is too large for an embedding (limit %d)", path, st.Size(), voices.MaxFileBytes)
	}
	// read through a limit too: a FIFO or a device has no size to Stat (/dev/zero is endless)
	b, err := io.ReadAll(io.LimitReader(f, voices.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > voices.MaxFileBytes {
		return nil, fmt.Errorf("%s: more than %d bytes is too large for an embedding", path, voices.MaxFileBytes)
	}
	if strings.EqualFold(filepath.Ext(path), ".npy") {
		a, err := kokoro.ReadNPY(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return a.Data, nil
	}
	p, err := kokoro.ParseBin(filepath.Base(path), b)
	if err != nil {
		return nil, err
	}
	return p.Data, nil
}

func findKokoroDir() string {
	if d := engines.FindKokoro(""); d != "" {
		return d
	}
	return filepath.Join(assets.ModelsDir(), engines.KokoroModels[0])
}

func voicesMix(env *cliEnv, lib *voices.Library, args []string) error {
	fs := newFlags(env, "voices mix", "")
	engine := fs.String("engine", "kokoro", "engine the mix is for")
	d := addDefaultFlags(fs.FlagSet)
	pos, err := voiceArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return errors.New("voices mix: give NAME and at least one VOICE=WEIGHT")
	}
	var parts []voices.Part
	for _, p := range pos[1:] {
		name, w, ok := strings.Cut(p, "=")
		weight := 1.0
		if ok {
			weight, err = strconv.ParseFloat(w, 64)
			if err != nil {
				return fmt.Errorf("voices mix: weight in %q is not a number", p)
			}
		}
		parts = append(parts, voices.Part{Voice: name, Weight: weight})
	}
	v, err := lib.MixOf(pos[0], *engine, parts)
	if err != nil {
		return err
	}
	d.apply(v)
	if err := lib.Save(v, *d.force); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "created %s (%s mix of %s)\n", v.Name, v.Engine, detail(v))
	return nil
}

func voicesExport(env *cliEnv, lib *voices.Library, args []string) error {
	fs := newFlags(env, "voices export", "")
	out := fs.String("o", "", "output file (default: standard output)")
	pos, err := voiceArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("voices export: give one NAME")
	}
	if *out == "" || *out == "-" {
		return lib.Export(pos[0], env.Stdout)
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := lib.Export(pos[0], f); err != nil {
		f.Close()
		os.Remove(*out)
		return err
	}
	return f.Close()
}

func voicesImport(env *cliEnv, lib *voices.Library, args []string) error {
	fs := newFlags(env, "voices import", "")
	name := fs.String("name", "", "save under this name")
	force := fs.Bool("force", false, "replace an existing voice")
	pos, err := voiceArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("voices import: give one FILE (or - for standard input)")
	}
	var r io.Reader = env.Stdin
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	v, err := lib.Import(r, *name, *force)
	if err != nil {
		return fmt.Errorf("voices import %s: %w", pos[0], err)
	}
	fmt.Fprintf(env.Stdout, "imported %s (%s %s voice)\n", v.Name, v.Engine, v.Kind)
	return nil
}

func voicesPreview(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "voices preview", "")
	text := fs.String("text", "", "text to speak (default: the preview sentence)")
	out := fs.String("o", "", "write to this WAV file instead of playing")
	pos, err := voiceArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("voices preview: give one NAME")
	}
	lang := ""
	if lib, err := voices.Open(voices.DefaultDir()); err == nil {
		if v, err := lib.Get(pos[0]); err == nil {
			lang = v.Defaults.Language
		}
	}
	if *text == "" {
		*text = voices.Preview(lang)
	}
	sayArgs := []string{"--voice", pos[0]}
	if *out != "" {
		sayArgs = append(sayArgs, "-o", *out)
	}
	return runSay(ctx, env, append(sayArgs, *text))
}
