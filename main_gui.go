package main

import (
	"context"
	"os"
)

// The desktop app is chosen here, before any GUI toolkit call, so that the headless paths
// never need a display.
func init() {
	register(&command{
		name:  "gui",
		usage: "gui  the desktop app (the default)",
		run: func(ctx context.Context, env *cliEnv, args []string) error {
			if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
				env.Log.Warn("no display (DISPLAY and WAYLAND_DISPLAY are unset); starting the headless server instead")
				return commands["serve"].run(ctx, env, args)
			}
			// The Fyne desktop app is not in this build yet; the server is the working face.
			env.Log.Warn("the desktop app is not part of this build yet; starting the headless server instead")
			return commands["serve"].run(ctx, env, args)
		},
	})
}
