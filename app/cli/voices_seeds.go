package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/parley-voice/parley/app/tune"
)

// seedsMax bounds one `voices seeds` run (each seed is two sentences of synthesis).
const seedsMax = 100000

const voicesSeedsHelp = `usage: parley voices seeds [--from N --to M | --suggested] [--text "…"] [--model DIR] [--json [--speaker]]

Has each ChatTTS seed speaker from N to M say a sentence or two and reports its pitch (median
F0 over its voiced frames) and how much of its speech is voiced: a voice under 15 % voiced
whispers. Use it to find a seed to keep (parley voices create NAME --engine chattts --seed S).
--suggested measures the seeds the model suggests instead (voiced ones, its lowest voice first,
which clones try first and the server gives OpenAI's voice names), if it names any.
--json prints one object per seed as it is measured; --speaker adds the seed's speaker vector.`

// seedLine is one seed of `voices seeds --json`.
type seedLine struct {
	tune.SeedReport
	Whispers bool `json:"whispers"`
	// Filtered: the model's seed filter was in use (the speaker is the draw it kept)
	Filtered bool      `json:"filtered"`
	Speaker  []float32 `json:"speaker,omitempty"`
}

func voicesSeeds(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "voices seeds", voicesSeedsHelp)
	from := fs.Int64("from", 1, "first seed")
	to := fs.Int64("to", 20, "last seed")
	text := fs.String("text", "", "what each seed says (default: a question and a statement)")
	model := fs.String("model", "", "ChatTTS export directory (default: the installed one, else the demo voice)")
	asJSON := fs.Bool("json", false, "one JSON object per seed")
	speaker := fs.Bool("speaker", false, "with --json: each seed's speaker vector too")
	suggested := fs.Bool("suggested", false, "the model's suggested seeds instead of --from..--to")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("voices seeds", "seeds takes no arguments")
	}
	ranged := false
	fs.Visit(func(f *flag.Flag) { ranged = ranged || f.Name == "from" || f.Name == "to" })
	if *suggested && ranged {
		return usageError("voices seeds", "--suggested measures the model's seeds: give it without --from and --to")
	}
	// seeds are 1 or more (0 is no seed); the count is taken after from ≤ to, so it cannot overflow
	if *from < 1 || *from > *to || uint64(*to-*from) >= seedsMax {
		return usageError("voices seeds", "--from %d --to %d (want 1 ≤ from ≤ to, at most %d seeds)", *from, *to, seedsMax)
	}
	if *speaker && !*asJSON {
		return usageError("voices seeds", "--speaker needs --json")
	}
	dir, err := chatttsDir(*model, "measuring seed speakers")
	if err != nil {
		return err
	}
	eng, err := env.factory().ChatTTS(dir)
	if err != nil {
		return err
	}
	defer eng.Close()
	var seeds []int64
	if *suggested {
		if seeds = eng.SuggestedSeeds(); len(seeds) == 0 {
			return fmt.Errorf("%s suggests no seeds: measure a range (--from, --to)", dir)
		}
	} else {
		for n := range *to - *from + 1 {
			seeds = append(seeds, *from+n)
		}
	}
	// the fitter (train.chattts.seed_filter) must see unfiltered draws: say whether these are
	filtered := eng.Model().Speaker.SeedFilter != nil
	var texts []string
	if *text != "" {
		texts = []string{*text}
	}
	enc := json.NewEncoder(env.Stdout)
	if !*asJSON {
		fmt.Fprintf(env.Stdout, "%8s  %7s  %6s\n", "SEED", "PITCH", "VOICED")
	}
	whispering := 0
	for _, seed := range seeds {
		r, err := tune.SeedVoice(ctx, eng, seed, texts)
		if err != nil {
			return err
		}
		if r.Whispers() {
			whispering++
		}
		if *asJSON {
			line := seedLine{SeedReport: r, Whispers: r.Whispers(), Filtered: filtered}
			if *speaker {
				if line.Speaker, err = eng.SampleSpeaker(seed); err != nil {
					return err
				}
			}
			if err := enc.Encode(line); err != nil {
				return err
			}
			continue
		}
		// a whisper's "pitch" is a few frames' worth (often the vocoder's frame rate): not shown
		note, pitch := "", "-"
		if r.Whispers() {
			note = "  whispers"
		} else if r.F0 > 0 {
			pitch = fmt.Sprintf("%.0f Hz", r.F0)
		}
		fmt.Fprintf(env.Stdout, "%8d  %7s  %4.0f %%%s\n", seed, pitch, 100*r.Voiced, note)
	}
	if !*asJSON {
		fmt.Fprintf(env.Stdout, "%d of %d seeds whisper\n", whispering, len(seeds))
	}
	return nil
}
