package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/tts/engines"
)

func init() {
	register(&command{
		name:  "models",
		usage: "models list|pull|verify|rm|import|path  manage models (`parley models -h` for more)",
		run:   runModels,
	})
}

const modelsUsage = `usage:
  parley models list [-json] [-verify]     every known model: installed, missing, partial, corrupt, in use
  parley models pull NAME…                 download, verify and install (resumes interrupted pulls)
  parley models verify [-json] [NAME…]     hash every file (default: all models on disk)
  parley models rm NAME…                   remove installed models (and partial downloads)
  parley models import [-model NAME] SRC   install from a directory or .tar.gz/.tar.bz2/.zip (offline)
  parley models path NAME                  print the directory of an installed model

Progress goes to stderr: a bar on a terminal, JSON lines otherwise.
Downloads honour HTTPS_PROXY/HTTP_PROXY/NO_PROXY, HF_ENDPOINT (a Hugging Face mirror),
MODELSCOPE_ENDPOINT and NPM_CONFIG_REGISTRY. Models live in $PARLEY_MODELS (default
~/.local/share/parley/models); the registry can be extended in ` + "$XDG_CONFIG_HOME/parley/models.toml."

func runModels(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(env.Stdout, modelsUsage)
		if len(args) == 0 {
			return fmt.Errorf("%w: parley models list|pull|verify|rm|import|path", errUsage)
		}
		return nil
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("models "+sub, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	full := fs.Bool("verify", false, "list: hash every file instead of the cheap size check")
	only := fs.String("model", "", "import: the model to import (default: every complete model found)")
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	names := fs.Args()

	mgr, err := assets.NewManager(nil, assets.Options{
		Log:      env.Log,
		Progress: assets.NewProgressPrinter(env.Stderr, assets.IsTerminal(env.Stderr)),
	})
	if err != nil {
		return err
	}
	switch sub {
	case "list", "ls":
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
			return fmt.Errorf("%w: parley models pull NAME…", errUsage)
		}
		var errs []error
		for _, n := range names {
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
	case "rm", "remove":
		if len(names) == 0 {
			return fmt.Errorf("%w: parley models rm NAME…", errUsage)
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
			return fmt.Errorf("%w: parley models import [-model NAME] DIR|ARCHIVE", errUsage)
		}
		var ids []string
		if *only != "" {
			ids = []string{*only}
		}
		got, err := mgr.Import(ctx, names[0], ids...)
		for _, id := range got {
			dir, _ := mgr.ModelDir(id)
			fmt.Fprintf(env.Stdout, "%s: imported into %s\n", id, dir)
		}
		return err
	case "path":
		if len(names) != 1 {
			return fmt.Errorf("%w: parley models path NAME", errUsage)
		}
		dir, err := mgr.Path(ctx, names[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(env.Stdout, dir)
		return nil
	}
	return fmt.Errorf("%w: unknown models subcommand %q (want list, pull, verify, rm, import or path)", errUsage, sub)
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
	eng := strings.ToLower(cfg.TTS.Engine)
	if eng == "" || eng == "auto" {
		eng = engines.Default("")
	}
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
