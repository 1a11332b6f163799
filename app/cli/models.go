package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/tts/chattts/convert"
	"github.com/parley-voice/parley/tts/engines"
)

func init() {
	register(&command{
		name:  "models",
		usage: "models list|pull|verify|rm|import|path  manage models (`parley models -h` for more)",
		run:   runModels,
	})
}

const modelsUsage = `usage: parley models COMMAND [flags] [args]

  parley models list [-json] [-verify]     every known model: installed, missing, partial, corrupt, in use
  parley models pull NAME…                 download, verify and install (resumes interrupted pulls)
  parley models verify [-json] [NAME…]     hash every file (default: all models on disk)
  parley models rm NAME…                   remove installed models (and partial downloads)
  parley models import [-model ID] [-name NAME] SRC
                                           install from a directory or .tar.gz/.tar.bz2/.zip (offline):
                                           a registry model's files, or a directory of a layout Parley
                                           runs (SenseVoice, Kokoro, ChatTTS, Silero, openWakeWord,
                                           onnx-community LLM, CAM++) as a local model NAME (default:
                                           the directory's name) with the hashes recorded at import
  parley models path NAME                  print the directory of an installed model

Progress goes to stderr: a bar on a terminal, JSON lines otherwise.
Downloads honour HTTPS_PROXY/HTTP_PROXY/NO_PROXY, HF_ENDPOINT (a Hugging Face mirror),
MODELSCOPE_ENDPOINT and NPM_CONFIG_REGISTRY. Models live in $PARLEY_MODELS (default
~/.local/share/parley/models); the registry can be extended in ` + "$XDG_CONFIG_HOME/parley/models.toml."

// modelsVerbs are the verbs of `parley models` with their usage lines (for -h).
var modelsVerbs = map[string]string{
	"list":   "usage: parley models list [-json] [-verify]\n\nEvery known model: installed, missing, partial, corrupt, in use.",
	"pull":   "usage: parley models pull NAME…\n\nDownload, verify and install (resumes interrupted pulls). Without network it says which\nfiles to fetch elsewhere for `parley models import`. `chattts` downloads the official\nrelease (chattts-release) and converts it in Go.",
	"verify": "usage: parley models verify [-json] [NAME…]\n\nHash every file (default: all models on disk).",
	"rm":     "usage: parley models rm NAME…\n\nRemove installed models (and partial downloads).",
	"import": "usage: parley models import [-model ID] [-name NAME] [-spk-stat FILE] DIR|ARCHIVE\n\nInstall without network: a registry model's files from a directory or .tar.gz/.tar.bz2/.zip,\nor a directory of a layout Parley runs (SenseVoice sherpa-onnx/FunASR, Kokoro, ChatTTS,\nSilero VAD, openWakeWord, onnx-community LLM, CAM++) as a local model with its own hashes.\nAn official ChatTTS release (a directory with asset/gpt/model.safetensors) is converted into\nthe chattts voice; its speaker statistics come from ChatTTS/config/config.py beside it.",
	"path":   "usage: parley models path NAME\n\nPrint the directory of an installed model.",
}

func runModels(ctx context.Context, env *cliEnv, args []string) error {
	if helpRequested(env, args, modelsUsage) {
		return nil
	}
	if len(args) == 0 {
		fmt.Fprintln(env.Stderr, modelsUsage)
		return usageError("models", "which command? list, pull, verify, rm, import or path")
	}
	sub, rest := args[0], args[1:]
	if sub == "ls" {
		sub = "list"
	}
	if sub == "remove" {
		sub = "rm"
	}
	help, ok := modelsVerbs[sub]
	if !ok {
		return usageError("models", "unknown models command %q%s (want list, pull, verify, rm, import or path)", sub, suggestFrom(sub, modelsVerbs))
	}
	fs := newFlags(env, "models "+sub, help)
	asJSON, full, only, localAs, spkStat, tmpl := new(bool), new(bool), new(string), new(string), new(string), new(string)
	switch sub {
	case "list":
		fs.BoolVar(asJSON, "json", false, "print JSON")
		fs.BoolVar(full, "verify", false, "hash every file instead of the cheap size check")
	case "verify":
		fs.BoolVar(asJSON, "json", false, "print JSON")
	case "import":
		fs.StringVar(only, "model", "", "the registry model to import (default: every complete model found)")
		fs.StringVar(localAs, "name", "", "the name of a model no registry entry describes (default: the directory's name)")
		fs.StringVar(spkStat, "spk-stat", "", "a ChatTTS release's ChatTTS/config/config.py (default: found beside its asset/ directory)")
		fs.StringVar(tmpl, "template", "", "the graphs a ChatTTS release of another size converts into (python3 -m train.chattts.template; default: the official size's, built in)")
	}
	if err := fs.parse(rest); err != nil {
		return err
	}
	names := fs.Args()

	progress := assets.NewProgressPrinter(env.Stderr, assets.IsTerminal(env.Stderr))
	mgr, err := assets.NewManager(nil, assets.Options{
		Log:      env.Log,
		Progress: quietProbes(progress),
	})
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		check := assets.CheckSize
		if *full {
			check = assets.CheckHash
		}
		sts, err := mgr.List(ctx, check, modelsInUse(mgr, env.Config)...)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(env.Stdout, sts)
		}
		printModelList(env.Stdout, sts, check)
		return nil
	case "pull":
		if len(names) == 0 {
			return usageError("models pull", "which model? (`parley models list` shows them)")
		}
		var errs []error
		for _, n := range names {
			if n == chatttsID { // a release to convert, not files to download
				if err := pullChatTTS(ctx, env, mgr); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			if err := mgr.Pull(ctx, n); err != nil {
				errs = append(errs, err)
				continue
			}
			dir, _ := mgr.ModelDir(n)
			fmt.Fprintf(env.Stdout, "%s: installed in %s\n", n, dir)
		}
		return errors.Join(errs...)
	case "verify":
		if len(names) == 0 {
			sts, err := mgr.List(ctx, assets.CheckSize)
			if err != nil {
				return err
			}
			for _, s := range sts {
				if s.State != assets.StateMissing && s.State != assets.StateUnavailable && (!s.Embedded || s.Extracted) {
					names = append(names, s.ID)
				}
			}
			if len(names) == 0 {
				fmt.Fprintln(env.Stdout, "no models on disk")
				return nil
			}
		}
		var out []assets.ModelStatus
		bad := 0
		for _, n := range names {
			st, err := mgr.Verify(ctx, n)
			if err != nil {
				return err
			}
			out = append(out, st)
			if st.State != assets.StateInstalled {
				bad++
			}
			if !*asJSON {
				printVerify(env.Stdout, st)
			}
		}
		if *asJSON {
			if err := writeJSON(env.Stdout, out); err != nil {
				return err
			}
		}
		if bad > 0 {
			return fmt.Errorf("%d of %d models failed verification; `parley models pull NAME` repairs them", bad, len(names))
		}
		return nil
	case "rm":
		if len(names) == 0 {
			return usageError("models rm", "which model?")
		}
		var errs []error
		for _, n := range names {
			if err := mgr.Remove(ctx, n); err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(env.Stdout, "%s: removed\n", n)
		}
		return errors.Join(errs...)
	case "import":
		if len(names) != 1 {
			return usageError("models import", "give one DIR or ARCHIVE")
		}
		if dir, ok := convert.AssetDir(names[0]); ok && (*only == "" || *only == chatttsID) {
			return importChatTTSRelease(ctx, env, mgr, names[0], dir, *spkStat, *tmpl)
		}
		return modelsImport(ctx, env, mgr, names[0], *only, *localAs)
	case "path":
		if len(names) != 1 {
			return usageError("models path", "give one NAME")
		}
		dir, err := mgr.Path(ctx, names[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(env.Stdout, dir)
		return nil
	}
	return nil
}

func suggestFrom(name string, m map[string]string) string {
	var names []string
	for k := range m {
		names = append(names, k)
	}
	if s := assets.Suggest(name, names); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

// quietProbes holds back a file's "probe" event until something else happens to that file, so
// a pull that reaches no host prints nothing but its one-line error.
func quietProbes(print func(assets.Event)) func(assets.Event) {
	var mu sync.Mutex
	held := map[string]assets.Event{}
	return func(ev assets.Event) {
		mu.Lock()
		defer mu.Unlock()
		key := ev.Model + "\x00" + ev.File
		if ev.Phase == "probe" {
			held[key] = ev
			return
		}
		if h, ok := held[key]; ok {
			delete(held, key)
			print(h)
		}
		print(ev)
	}
}

// modelsImport installs from a directory or archive: the registry's models it holds, else
// (a directory, no -model) a model of a layout Parley runs, under a name of its own.
func modelsImport(ctx context.Context, env *cliEnv, mgr *assets.Manager, src, only, name string) error {
	var ids []string
	if only != "" {
		ids = []string{only}
	}
	var got []string
	var err error
	if name == "" {
		got, err = mgr.Import(ctx, src, ids...)
		for _, id := range got {
			dir, _ := mgr.ModelDir(id)
			fmt.Fprintf(env.Stdout, "%s: imported into %s\n", id, dir)
		}
		st, serr := os.Stat(src)
		if len(got) > 0 || only != "" || serr != nil || !st.IsDir() ||
			!errors.Is(err, assets.ErrNothingToImport) && !errors.Is(err, assets.ErrChecksum) && !errors.Is(err, assets.ErrWrongSize) {
			return err
		}
	}
	// Not a registry model (or not the registry's copy of one): a layout Parley can run?
	layout, lerr := detectLayout(src)
	if lerr != nil {
		if err != nil {
			return fmt.Errorf("%w; and %v", err, lerr)
		}
		return lerr
	}
	if name == "" {
		name = localName(src)
		if _, known := mgr.Registry().Lookup(name); known == nil {
			name += "-local" // the registry's own entry keeps its name
		}
	}
	dir, err := mgr.InstallLocal(ctx, src, assets.LocalModel{ID: name, Kind: layout.kind,
		Description: layout.format + ", imported from " + src, Files: layout.files})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s: %s model (%s) imported into %s; use it by name (e.g. --model %s)\n",
		name, layout.kind, layout.format, dir, name)
	return nil
}

// modelsInUse names the models the configuration would load: the configured (or best
// installed) ASR model, Silero VAD, openWakeWord in wake-word mode, Kokoro when it is the TTS
// engine.
func modelsInUse(mgr *assets.Manager, cfg *config.Config) []string {
	if cfg == nil {
		return nil
	}
	use := []string{"silero-vad-v5"}
	if _, err := mgr.Registry().Lookup(cfg.ASR.Model); err == nil {
		use = append(use, cfg.ASR.Model)
	} else if cfg.ASR.Model == "" {
		if id, ok := mgr.BestInstalled(assets.KindASR); ok {
			use = append(use, id)
		}
	}
	if cfg.Assistant.Mode == "wake-word" {
		use = append(use, "openwakeword")
	}
	eng := factory.EngineName(cfg.TTS.Engine)
	switch {
	case strings.HasPrefix(eng, "kokoro"):
		if d := engines.FindKokoro(""); d != "" {
			use = append(use, filepath.Base(d))
		}
	case eng == "chattts":
		if d, _ := engines.FindChatTTS("", true); d != "" {
			use = append(use, filepath.Base(d))
		}
	}
	return use
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printModelList(w io.Writer, sts []assets.ModelStatus, check assets.Check) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tKIND\tSTATE\tSIZE\tNOTES\tDESCRIPTION")
	for _, s := range sts {
		var notes []string
		if s.InUse {
			notes = append(notes, "in use")
		}
		if s.Demo {
			notes = append(notes, "demo-grade")
		}
		if s.Embedded {
			notes = append(notes, "embedded")
		}
		size := "?"
		switch {
		case s.State == assets.StatePartial && s.Total > 0:
			size = fmt.Sprintf("%s/%s", humanSize(s.Bytes), humanSize(s.Total))
		case s.Bytes > 0:
			size = humanSize(s.Bytes)
		case s.Total > 0:
			size = humanSize(s.Total)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Kind, s.State, size, strings.Join(notes, ","), s.Description)
	}
	tw.Flush()
	if check == assets.CheckSize {
		fmt.Fprintln(w, "\n(states from a size check; `parley models verify` hashes every file)")
	}
}

func printVerify(w io.Writer, st assets.ModelStatus) {
	fmt.Fprintf(w, "%s: %s (sha256 of every file)\n", st.ID, st.State)
	for _, f := range st.Files {
		if f.State != assets.StateInstalled || f.Problem != "" {
			msg := string(f.State)
			if f.Problem != "" {
				msg += ": " + f.Problem
			}
			fmt.Fprintf(w, "  %s: %s\n", f.Path, msg)
		}
	}
}

func humanSize(n int64) string {
	switch {
	case n < 1<<20:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
