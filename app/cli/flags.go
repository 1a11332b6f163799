package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// cmdFlags is the flag set of a subcommand (or of one verb of it: "models pull"). Every
// subcommand parses its arguments the same way:
//   - flags may come anywhere among the arguments (`parley say "hello" -o out.wav`); "--"
//     ends them, and "-" is an argument (standard input);
//   - -h or --help prints the command's usage and its flags to standard output, and parley
//     exits 0;
//   - a bad flag is a usage error (exit 2) that names it and points to `parley help`.
//
// The global flags (--config, --set, --provider, --log-level) are taken out of the
// arguments before a subcommand sees them, wherever they are (globalArgs).
type cmdFlags struct {
	*flag.FlagSet
	out  io.Writer
	help string // what -h prints above the flags; "usage: parley NAME …" first
}

// newFlags returns the flag set of the command name ("say", "models pull"). help is printed
// by -h above the flags; empty means the command's one-line usage from its registration.
func newFlags(env *cliEnv, name, help string) *cmdFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, usage printed by printUsage
	fs.Usage = func() {}
	if help == "" {
		help = oneLineHelp(name)
	}
	return &cmdFlags{FlagSet: fs, out: env.Stdout, help: help}
}

// oneLineHelp turns a registered command's usage line into a short help text.
func oneLineHelp(name string) string {
	top, _, _ := strings.Cut(name, " ")
	c, ok := commands[top]
	if !ok {
		return "usage: parley " + name + " [flags]"
	}
	head, desc, _ := strings.Cut(c.usage, "  ")
	if top != name { // a verb: the registration's line is the whole command's
		head = name + " [flags]"
	}
	return strings.TrimSpace("usage: parley "+head) + "\n\n" + strings.TrimSpace(desc)
}

// parse parses args, flags anywhere. The positional arguments are then f.Args().
func (f *cmdFlags) parse(args []string) error {
	var pos []string
	for len(args) > 0 {
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		if err := f.FlagSet.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.printUsage(f.out)
				return err
			}
			return fmt.Errorf("%w: %v (see `parley help %s`)", errUsage, err, f.Name())
		}
		rest := f.FlagSet.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			pos = append(pos, rest...) // the flag package consumed a "--": the rest is arguments
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	// Leave the positional arguments in f.Args().
	return f.FlagSet.Parse(append([]string{"--"}, pos...))
}

// printUsage writes the help text and the flags.
func (f *cmdFlags) printUsage(w io.Writer) {
	fmt.Fprintln(w, strings.TrimRight(f.help, "\n"))
	has := false
	f.VisitAll(func(*flag.Flag) { has = true })
	if has {
		fmt.Fprintln(w, "\nFlags:")
		f.SetOutput(w)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
	fmt.Fprintln(w, "\nGlobal flags (anywhere): --config FILE, --set section.key=value, --provider P, --log-level L")
}

// usageError reports a misuse of a command: exit 2 with the message and where to look.
func usageError(name, format string, args ...any) error {
	return fmt.Errorf("%w: %s (see `parley help %s`)", errUsage, fmt.Sprintf(format, args...), name)
}

// isHelp says whether an argument asks for help.
func isHelp(a string) bool { return a == "-h" || a == "--help" || a == "-help" || a == "help" }

// globalFlagNames are the flags parley takes before or after the subcommand.
var globalFlagNames = map[string]bool{"config": true, "set": true, "provider": true, "log-level": true}

// globalArgs splits a subcommand's arguments into the global flags among them (with their
// values) and the rest, so that `parley chat --set llm.model=x` works as `parley --set … chat`.
// A "--" ends the search.
func globalArgs(args []string) (globals, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return globals, append(rest, args[i:]...)
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || a == "-" || !globalFlagNames[name] {
			rest = append(rest, a)
			continue
		}
		globals = append(globals, a)
		if !hasValue && i+1 < len(args) {
			i++
			globals = append(globals, args[i])
		}
	}
	return globals, rest
}

// serveAsCommand rewrites `parley [globals] --serve [flags]` as `parley [globals] serve
// [flags]`, so that --serve takes serve's own flags (`parley --serve --tls-cert …` said "flag
// provided but not defined"). The search stops at the first argument that is not a global
// flag or its value.
func serveAsCommand(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "--serve", "-serve", "--serve=true", "-serve=true":
			out := append(append(append([]string(nil), args[:i]...), "serve"), args[i+1:]...)
			return out
		case "--":
			return args
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || a == "-" || !globalFlagNames[name] {
			return args
		}
		if !hasValue {
			i++ // its value
		}
	}
	return args
}
