package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/voices/clone"
)

func init() {
	register(&command{
		name:  "finetune",
		usage: "finetune new|list|import|slice|label|clips|edit|drop|restore|status|rm  prepare your recordings for a cloned voice",
		run:   runFinetune,
	})
}

const finetuneUsage = `usage: parley finetune COMMAND NAME [flags] [args]

The voice-clone wizard's steps, one command each. Datasets live in %s.

  new NAME                          start a dataset
  list                              the datasets and what they hold
  import NAME FILE|DIR…             add recordings: files, folders, one long recording
                                    (WAV, or any format ffmpeg reads)
  slice NAME                        cut recordings into 2–15 s clips at pauses (Silero VAD);
                                    clipped, too quiet or too noisy clips are set aside with
                                    the reason
  label NAME [--force] [--model M]  transcribe the clips with the recogniser (SenseVoice)
  clips NAME [--all] [--json]       the proofread table: clip, seconds, text, warnings
  edit NAME CLIP "TEXT"             correct a clip's transcript
  drop NAME CLIP | restore NAME CLIP
  status NAME [--json]              usable minutes, rejections, warnings, what to do next
  rm NAME                           delete a dataset and its audio
`

// finetuneDir is where the datasets live, the wizard's too.
func finetuneDir() string { return tune.DatasetsDir() }

// finetuneVerbs are verbs with their own flags, registered by finetune_*.go files.
var finetuneVerbs = map[string]finetuneVerb{}

type finetuneVerb struct {
	usage string // the lines for finetuneUsage
	run   func(ctx context.Context, env *cliEnv, args []string) error
}

func finetuneUsageText() string {
	s := fmt.Sprintf(finetuneUsage, finetuneDir())
	names := make([]string, 0, len(finetuneVerbs))
	for n := range finetuneVerbs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s += finetuneVerbs[n].usage
	}
	return s
}

func runFinetune(ctx context.Context, env *cliEnv, args []string) error {
	usage := func() { fmt.Fprint(env.Stdout, finetuneUsageText()) }
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		if len(args) == 0 {
			return fmt.Errorf("%w: finetune: missing command", errUsage)
		}
		return nil
	}
	cmd, rest := args[0], args[1:]
	if v, ok := finetuneVerbs[cmd]; ok {
		return v.run(ctx, env, rest)
	}
	fs := newFlags(env, "finetune "+cmd, fmt.Sprintf(finetuneUsage, finetuneDir()))
	force := fs.Bool("force", false, "label: transcribe again the clips the recogniser labelled (never your own edits)")
	model := fs.String("model", "", "label: speech recognition model (id or directory; default the best installed)")
	asJSON := fs.Bool("json", false, "print JSON")
	all := fs.Bool("all", false, "clips: also the rejected and dropped clips")
	if err := fs.parse(rest); err != nil {
		return err
	}
	pos := fs.Args()
	if cmd == "list" {
		return finetuneList(env, *asJSON)
	}
	if len(pos) == 0 {
		usage()
		return fmt.Errorf("%w: finetune %s: which dataset?", errUsage, cmd)
	}
	name, pos := pos[0], pos[1:]
	dir := filepath.Join(finetuneDir(), name)
	if cmd == "new" {
		if _, err := clone.Create(dir, name); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "dataset %s created in %s\nnext: parley finetune import %s FILE|DIR…\n", name, dir, name)
		return nil
	}
	if cmd == "rm" {
		if _, err := clone.Open(dir); err != nil {
			return err
		}
		return os.RemoveAll(dir)
	}
	d, err := clone.Open(dir)
	if err != nil {
		if errors.Is(err, clone.ErrNotDataset) {
			return fmt.Errorf("no dataset %q (see `parley finetune list`, or `parley finetune new %s`)", name, name)
		}
		return err
	}
	switch cmd {
	case "import":
		return finetuneImport(ctx, env, d, pos)
	case "slice":
		return finetuneSlice(ctx, env, d)
	case "label":
		return finetuneLabel(ctx, env, d, *model, *force)
	case "clips":
		return finetuneClips(env, d, *all, *asJSON)
	case "edit":
		if len(pos) != 2 {
			return fmt.Errorf("%w: finetune edit NAME CLIP \"TEXT\"", errUsage)
		}
		return d.SetText(pos[0], pos[1])
	case "drop", "restore":
		if len(pos) != 1 {
			return fmt.Errorf("%w: finetune %s NAME CLIP", errUsage, cmd)
		}
		return d.Drop(pos[0], cmd == "drop")
	case "status":
		return finetuneStatus(env, d, *asJSON)
	}
	usage()
	return fmt.Errorf("%w: finetune: unknown command %q", errUsage, cmd)
}

func finetuneList(env *cliEnv, asJSON bool) error {
	entries, err := os.ReadDir(finetuneDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	type row struct {
		Name string `json:"name"`
		clone.Summary
		Error string `json:"error,omitempty"`
	}
	var rows []row
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d, err := clone.Open(filepath.Join(finetuneDir(), e.Name()))
		if err != nil {
			rows = append(rows, row{Name: e.Name(), Error: err.Error()})
			continue
		}
		rows = append(rows, row{Name: d.Name, Summary: d.Summary()})
	}
	if asJSON {
		return json.NewEncoder(env.Stdout).Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(env.Stdout, "no datasets; start one with `parley finetune new NAME`")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRECORDINGS\tCLIPS\tUSABLE\tMINUTES")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t(unreadable: %s)\n", r.Name, r.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\n", r.Name, r.Sources, r.Clips, r.Usable, r.UsableMinutes)
	}
	return tw.Flush()
}

func finetuneImport(ctx context.Context, env *cliEnv, d *clone.Dataset, inputs []string) error {
	if len(inputs) == 0 {
		return fmt.Errorf("%w: finetune import NAME FILE|DIR…", errUsage)
	}
	open := func(ctx context.Context, path string) (audio.Source, func(), error) { return openAudio(ctx, env, path) }
	added, problems, err := d.Import(ctx, inputs, open, clone.ImportOptions{
		Progress: func(done, total int, file string) {
			if total > 20 && done%20 == 0 {
				env.Log.Info("importing", "done", done, "of", total)
			}
		},
	})
	var secs float64
	for _, s := range added {
		secs += s.Seconds
	}
	fmt.Fprintf(env.Stdout, "imported %d recordings (%.1f min)\n", len(added), secs/60)
	printProblems(env.Stdout, problems)
	if err != nil {
		return err
	}
	if len(added) == 0 {
		return errors.New("nothing was imported")
	}
	fmt.Fprintf(env.Stdout, "next: parley finetune slice %s\n", d.Name)
	return nil
}

func printProblems(w io.Writer, problems []clone.Problem) {
	for _, p := range problems {
		fmt.Fprintf(w, "  skipped %s\n", p)
	}
}

func finetuneSlice(ctx context.Context, env *cliEnv, d *clone.Dataset) error {
	det, err := env.factory().VAD("", vad.Config{})
	if err != nil {
		return fmt.Errorf("voice activity detection: %w", err)
	}
	defer det.Close()
	problems, err := d.Slice(ctx, det, clone.SliceOptions{})
	printProblems(env.Stdout, problems)
	if err != nil {
		return err
	}
	s := d.Summary()
	fmt.Fprintf(env.Stdout, "%d clips, %d set aside%s\n", s.Clips, s.Clips-s.Usable-s.Unlabelled-s.Dropped, s.RejectedText())
	fmt.Fprintf(env.Stdout, "next: parley finetune label %s\n", d.Name)
	return nil
}

func finetuneLabel(ctx context.Context, env *cliEnv, d *clone.Dataset, model string, force bool) error {
	rec, m, err := env.factory().Recognizer(ctx, model, asr.Config{})
	if errors.Is(err, factory.ErrNoASR) {
		return fmt.Errorf("%w (or give --model DIR)", err)
	}
	if err != nil {
		return err
	}
	defer rec.Close()
	if m.Demo {
		env.Log.Warn("the installed recogniser is demo-grade: expect to correct many transcripts (`parley models pull " + factory.RealASR + "` gets the real one)")
	}
	if err := d.Label(ctx, factory.CloneTranscriber(rec), clone.LabelOptions{Force: force}); err != nil {
		return err
	}
	s := d.Summary()
	fmt.Fprintf(env.Stdout, "%d clips usable (%.1f min), %d to look at\nnext: parley finetune clips %s (then edit/drop)\n", s.Usable, s.UsableMinutes, s.Warnings, d.Name)
	return nil
}

func finetuneClips(env *cliEnv, d *clone.Dataset, all, asJSON bool) error {
	var clips []clone.Clip
	for _, c := range d.Clips {
		if all || (c.Rejected == "" && !c.Dropped) {
			clips = append(clips, c)
		}
	}
	if asJSON {
		if clips == nil {
			clips = []clone.Clip{}
		}
		return json.NewEncoder(env.Stdout).Encode(clips)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIP\tSECONDS\tSNR\tTEXT\tNOTE")
	for _, c := range clips {
		note := c.Warning
		switch {
		case c.Rejected != "":
			note = "set aside: " + c.Rejected
		case c.Dropped:
			note = "dropped"
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.0f\t%s\t%s\n", c.ID, c.Seconds, c.SNR, c.Text, note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := d.Summary()
	fmt.Fprintf(env.Stdout, "%d usable clips, %.1f minutes\n", s.Usable, s.UsableMinutes)
	return nil
}

func finetuneStatus(env *cliEnv, d *clone.Dataset, asJSON bool) error {
	s := d.Summary()
	if asJSON {
		return json.NewEncoder(env.Stdout).Encode(map[string]any{"name": d.Name, "dir": d.Dir(), "lang": d.Lang, "summary": s})
	}
	fmt.Fprintf(env.Stdout, "%s (%s)\n  recordings %d, clips %d%s\n  usable %d clips, %.1f minutes; %d unlabelled, %d dropped, %d with warnings\n",
		d.Name, d.Dir(), s.Sources, s.Clips, s.RejectedText(), s.Usable, s.UsableMinutes, s.Unlabelled, s.Dropped, s.Warnings)
	switch {
	case s.Sources == 0:
		fmt.Fprintf(env.Stdout, "next: parley finetune import %s FILE|DIR…\n", d.Name)
	case s.Unsliced > 0:
		fmt.Fprintf(env.Stdout, "next: parley finetune slice %s\n", d.Name)
	case s.Unlabelled > 0:
		fmt.Fprintf(env.Stdout, "next: parley finetune label %s\n", d.Name)
	case s.UsableMinutes < 3:
		fmt.Fprintf(env.Stdout, "a fine-tune wants at least 3 minutes of usable speech; import more recordings\n")
	default:
		fmt.Fprintf(env.Stdout, "ready: proofread with `parley finetune clips %s`\n", d.Name)
	}
	return nil
}
