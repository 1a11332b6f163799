// Package cli is Parley's command-line layer: global flags, configuration and logging, and
// one file per subcommand. The desktop app is handed in by package main (GUIFunc) so that
// this package, like everything but app/gui and main, never imports the GUI toolkit.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/logging"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/gpu"
)

// cliEnv is what every subcommand gets.
type cliEnv struct {
	Config *config.Config
	Log    *slog.Logger
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	GUI    GUIFunc // nil in builds and tests without the desktop app
	fac    *factory.Factory
}

// factory is the command's one factory, which run builds from the loaded configuration
// (runtime.* and --provider applied) and logger: every engine a command opens comes from it.
func (e *cliEnv) factory() *factory.Factory { return e.fac }

// GUIOptions are the desktop app's command-line options.
type GUIOptions struct {
	Log      *slog.Logger
	LogLevel slog.Level // for the app's log file
	NoAudio  bool       // text only: no microphone, speaker or speech recognition
	NoTray   bool       // no system tray icon
	// Diagnostics is doctor's report as JSON (the app's "Copy diagnostics").
	Diagnostics func(ctx context.Context) ([]byte, error)
	// SetUpGPU is doctor --gpu (the app's Settings → Set up GPU): its report, and why the GPU
	// cannot run yet.
	SetUpGPU func(ctx context.Context, progress func(what string, done, total int64)) (string, error)
}

// GUIFunc runs the desktop app until it is closed or ctx ends.
type GUIFunc func(ctx context.Context, cfg *config.Config, o GUIOptions) error

// command is one subcommand. Subcommands live in <name>.go files (doctor.go, say.go, …) and register themselves.
type command struct {
	name  string
	usage string // "name ARGS  one-line description"
	run   func(ctx context.Context, env *cliEnv, args []string) error
}

// commands is filled by init functions before main runs and only read afterwards.
var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("parley: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks an error caused by how parley was invoked; it exits with status 2.
var errUsage = errors.New("usage")

// Main runs parley with the given arguments (without the program name) and returns the
// process's exit status: 0, 1 for a failure, 2 for a usage error. gui may be nil.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, gui GUIFunc) int {
	return run(ctx, args, stdin, stdout, stderr, gui)
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// globalOpts are parley's own flags, before or after the command.
type globalOpts struct {
	serve, version              bool
	cfgPath, logLevel, provider string
	sets                        stringList
}

func globalFlags() (*flag.FlagSet, *globalOpts) {
	var g globalOpts
	fs := flag.NewFlagSet("parley", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.BoolVar(&g.serve, "serve", false, "run headless as a speech server")
	fs.StringVar(&g.cfgPath, "config", "", "configuration file (default "+config.DefaultPath()+")")
	fs.StringVar(&g.logLevel, "log-level", "", "debug | info | warn | error (default from config, PARLEY_LOG_LEVEL)")
	fs.StringVar(&g.provider, "provider", "", "execution provider: auto | cpu | cuda[:N] | tensorrt[:N]")
	fs.BoolVar(&g.version, "version", false, "print the version and exit")
	fs.Var(&g.sets, "set", "override a config key, section.key=value (repeatable)")
	return fs, &g
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, gui GUIFunc) int {
	fs, g := globalFlags()
	serve, cfgPath, logLevel, provider, showVersion := &g.serve, &g.cfgPath, &g.logLevel, &g.provider, &g.version
	sets := &g.sets
	args = serveAsCommand(args)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, fs)
			return 0
		}
		fmt.Fprintf(stderr, "parley: %v (see `parley help`)\n", err)
		return 2
	}
	if *showVersion {
		bi, _ := debug.ReadBuildInfo()
		fmt.Fprintln(stdout, versionLine(release(), stampOf(bi, vcsStamp)))
		return 0
	}

	rest := fs.Args()
	name := ""
	switch {
	case *serve:
		name = "serve"
	case len(rest) > 0:
		name, rest = rest[0], rest[1:]
	default:
		name = "gui"
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "parley: unknown command %q%s; `parley help` lists the commands\n", name, suggest(name))
		return 2
	}
	// The global flags may also follow the subcommand: `parley chat --set llm.model=x`.
	globals, rest := globalArgs(rest)
	if err := fs.Parse(globals); err != nil {
		fmt.Fprintf(stderr, "parley %s: %v (see `parley help`)\n", name, err)
		return 2
	}
	if *provider != "" {
		*sets = append(*sets, "runtime.provider="+*provider)
	}
	if lv := os.Getenv("PARLEY_LOG_LEVEL"); lv != "" && *logLevel == "" {
		*logLevel = lv
	}
	if *logLevel != "" {
		*sets = append(*sets, "log.level="+*logLevel)
	}

	cfg, err := config.Load(*cfgPath, *sets)
	if err != nil {
		if !wantsHelp(name, rest) {
			fmt.Fprintln(stderr, "parley:", err)
			return 1
		}
		cfg = config.Default() // help needs no configuration, and must work when it is broken
	}
	gpu.UseLibrary(factory.ORTLibrary(cfg))
	level, _ := logging.ParseLevel(cfg.Log.Level) // validated by config.Load
	log := logging.New(stderr, level)
	slog.SetDefault(log)

	env := &cliEnv{Config: cfg, Log: log, Stdin: stdin, Stdout: stdout, Stderr: stderr, GUI: gui,
		fac: factory.New(cfg, log)}
	if err := cmd.run(ctx, env, rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		// "parley serve: serve: …" says the command twice: packages name themselves
		fmt.Fprintf(stderr, "parley %s: %s\n", name, strings.TrimPrefix(err.Error(), name+": "))
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// wantsHelp says whether the command line only asks for help.
func wantsHelp(name string, args []string) bool {
	if name == "help" {
		return true
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" || a == "-help" {
			return true
		}
	}
	return false
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Parley %s: a private, offline-first voice assistant.\n\n", release())
	fmt.Fprintln(w, "Usage:\n  parley [flags]              the desktop app\n  parley --serve [flags]      headless speech server\n  parley COMMAND [args and flags]\n  parley help [COMMAND]       how to use a command\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		if n != "gui" && n != "serve" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		u := commands[n].usage
		head, desc, _ := strings.Cut(u, "  ")
		if len(head) > 34 {
			fmt.Fprintf(w, "  %s\n  %-34s %s\n", head, "", strings.TrimSpace(desc))
			continue
		}
		fmt.Fprintf(w, "  %-34s %s\n", head, strings.TrimSpace(desc))
	}
	fmt.Fprintln(w, "\nFlags (before or after the command):")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// suggest names the closest known command, for typos.
func suggest(name string) string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	if best := assets.Suggest(name, names); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}
