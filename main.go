// Command parley is a private, offline-first voice assistant: the desktop app by default,
// a headless speech server with --serve, and a set of subcommands for each part
// (app/cli). This file only joins the command-line layer to the desktop app, the one
// place besides app/gui that may import the GUI toolkit.
package main

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // city time zones work on machines without tzdata

	"github.com/parley-voice/parley/app/cli"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/gui"
)

// fyneApp holds Parley's version, the one place it is written (app/cli.SetRelease).
//
//go:embed FyneApp.toml
var fyneApp []byte

func main() {
	if err := cli.SetRelease(fyneApp); err != nil {
		fmt.Fprintln(os.Stderr, "parley:", err) // a broken build; it still runs, as "dev"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, runGUI)
	stop()
	os.Exit(code)
}

func runGUI(ctx context.Context, cfg *config.Config, o cli.GUIOptions) error {
	return gui.Run(ctx, cfg, gui.Options{Log: o.Log, LogLevel: o.LogLevel, NoAudio: o.NoAudio, NoTray: o.NoTray, Diagnostics: o.Diagnostics, SetUpGPU: o.SetUpGPU})
}
