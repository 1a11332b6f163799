package cli

import (
	"context"
	"fmt"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/wire"
)

// chatVoice is `parley chat --voice`: the whole assistant loop headless on the default audio
// devices, printing the transcript, the answer and the latency line of each turn. chat.go
// calls it with the arguments left after its own flags when --voice is given.
func chatVoice(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "chat --voice", "")
	mode := fs.String("mode", "", "push-to-talk | hands-free | wake-word (default: hands-free, or assistant.mode when set to wake-word)")
	asrModel := fs.String("asr-model", "", "speech recognition model directory or id (default asr.model, else the best installed)")
	noHistory := fs.Bool("no-history", false, "do not record the conversation")
	verbose := fs.Bool("v", false, "also print states, barge-ins and rejected echoes")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	cfg := *env.Config
	switch {
	case *mode != "":
		cfg.Assistant.Mode = *mode
	case cfg.Assistant.Mode != "wake-word":
		cfg.Assistant.Mode = "hands-free" // a terminal has no talk button
	}
	if _, err := app.ParseMode(cfg.Assistant.Mode); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	fac := env.factory()
	if cfg.Assistant.Mode != env.Config.Assistant.Mode {
		fac = fac.With(&cfg) // --mode, or hands-free where a terminal has no talk button
	}
	a, err := wire.BuildFrom(ctx, fac, wire.Options{Log: env.Log, ASRModel: *asrModel, NoHistory: *noHistory})
	if err != nil {
		return err
	}
	defer a.Close()
	return wire.ChatVoice(ctx, a, env.Stdin, env.Stdout, *verbose)
}
