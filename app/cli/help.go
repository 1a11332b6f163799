package cli

import (
	"context"
	"fmt"
)

func init() {
	register(&command{
		name:  "help",
		usage: "help [COMMAND [VERB]]  how to use parley, or one of its commands",
		run:   runHelp,
	})
}

// runHelp prints parley's usage, or asks a command for its own (`parley help models pull`
// runs `parley models pull -h`), on standard output.
func runHelp(ctx context.Context, env *cliEnv, args []string) error {
	hf := newFlags(env, "help", "")
	if err := hf.parse(args); err != nil {
		return err
	}
	if args = hf.Args(); len(args) == 0 {
		fs, _ := globalFlags()
		usage(env.Stdout, fs)
		return nil
	}
	if args[0] == "help" {
		hf.printUsage(env.Stdout)
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return usageError("help", "unknown command %q%s", args[0], suggest(args[0]))
	}
	return cmd.run(ctx, env, append(append([]string(nil), args[1:]...), "-h"))
}

// helpRequested prints a command's help text when its arguments are just a request for help
// (for commands whose first argument is a verb, before any flag set exists).
func helpRequested(env *cliEnv, args []string, help string) bool {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(env.Stdout, help)
		return true
	}
	return false
}
