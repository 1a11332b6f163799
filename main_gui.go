package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/parley-voice/parley/app/gui"
)

// The desktop app is chosen here, before any GUI toolkit call, so that the headless paths
// never need a display: without DISPLAY or WAYLAND_DISPLAY the server starts instead, and
// no Fyne function runs.
func init() {
	register(&command{
		name:  "gui",
		usage: "gui [--no-audio] [--no-tray]  the desktop app (the default)",
		run: func(ctx context.Context, env *cliEnv, args []string) error {
			if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
				env.Log.Warn("no display (DISPLAY and WAYLAND_DISPLAY are unset); starting the headless server instead")
				return commands["serve"].run(ctx, env, args)
			}
			fs := flag.NewFlagSet("gui", flag.ContinueOnError)
			fs.SetOutput(env.Stderr)
			noAudio := fs.Bool("no-audio", false, "text only: no microphone, speaker or speech recognition")
			noTray := fs.Bool("no-tray", false, "no system tray icon")
			if err := fs.Parse(args); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return err
				}
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			return gui.Run(ctx, env.Config, gui.Options{Log: env.Log, NoAudio: *noAudio, NoTray: *noTray})
		},
	})
}
