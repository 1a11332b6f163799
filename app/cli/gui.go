package cli

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/parley-voice/parley/app/logging"
)

// The desktop app is chosen here, before any GUI toolkit call, so that the headless paths
// never need a display: without DISPLAY or WAYLAND_DISPLAY the server starts instead, and
// no Fyne function runs. The app itself is env.GUI, handed in by package main.
func init() {
	register(&command{
		name:  "gui",
		usage: "gui [--no-audio] [--no-tray]  the desktop app (the default)",
		run: func(ctx context.Context, env *cliEnv, args []string) error {
			fs := newFlags(env, "gui", "")
			noAudio := fs.Bool("no-audio", false, "text only: no microphone, speaker or speech recognition")
			noTray := fs.Bool("no-tray", false, "no system tray icon")
			if wantsHelp("gui", args) {
				return fs.parse(args) // before the display check: help starts nothing
			}
			if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
				env.Log.Warn("no display (DISPLAY and WAYLAND_DISPLAY are unset); starting the headless server instead")
				return commands["serve"].run(ctx, env, args)
			}
			if os.Getenv("WAYLAND_DISPLAY") == "" && !displayReachable(os.Getenv("DISPLAY"), "/tmp/.X11-unix") {
				// a stale DISPLAY (an ssh session without forwarding, a stopped X server) would
				// make GLFW panic; say so and serve instead
				env.Log.Warn("the X display does not answer; starting the headless server instead", "DISPLAY", os.Getenv("DISPLAY"))
				return commands["serve"].run(ctx, env, args)
			}
			if err := fs.parse(args); err != nil {
				return err
			}
			if env.GUI == nil {
				env.Log.Warn("this build has no desktop app; starting the headless server instead")
				return commands["serve"].run(ctx, env, fs.Args())
			}
			level, _ := logging.ParseLevel(env.Config.Log.Level) // validated by config.Load
			cfg := env.Config
			diag := func(ctx context.Context) ([]byte, error) {
				return json.MarshalIndent(diagnose(ctx, cfg, false), "", "  ")
			}
			setUp := func(ctx context.Context, progress func(string, int64, int64)) (string, error) {
				return SetUpGPU(ctx, env.Log, progress)
			}
			return env.GUI(ctx, env.Config, GUIOptions{Log: env.Log, LogLevel: level, NoAudio: *noAudio, NoTray: *noTray, Diagnostics: diag, SetUpGPU: setUp})
		},
	})
}

// displayReachable says whether the X server named by display ("[host]:N[.S]",
// "unix:N") accepts connections: the local socket (abstract or in socketDir) for ":N", TCP
// port 6000+N for "host:N". It dials only; no X protocol, no toolkit call.
func displayReachable(display, socketDir string) bool {
	host, rest, ok := strings.Cut(display, ":")
	if !ok {
		return false
	}
	num, _, _ := strings.Cut(rest, ".")
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return false
	}
	dial := func(network, addr string) bool {
		c, err := net.DialTimeout(network, addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	if host == "" || host == "unix" {
		sock := socketDir + "/X" + num
		return dial("unix", sock) || dial("unix", "@"+sock)
	}
	return dial("tcp", net.JoinHostPort(host, strconv.Itoa(6000+n)))
}
