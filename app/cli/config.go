package cli

import (
	"context"
	"fmt"

	"github.com/parley-voice/parley/app/config"
)

func init() {
	register(&command{
		name:  "config",
		usage: "config path|show|keys  where the config file is, the effective config, every key",
		run:   runConfig,
	})
}

const configUsage = `usage: parley config path|show|keys

  path   where the configuration file is (or would be)
  show   the effective configuration: defaults, the file, PARLEY_* variables and --set
  keys   every key, with its environment variable`

func runConfig(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "config", configUsage)
	if err := fs.parse(args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) != 1 {
		return usageError("config", "which one? path, show or keys")
	}
	switch args[0] {
	case "path":
		p := env.Config.Path
		if p == "" {
			p = env.Config.File // --config or $PARLEY_CONFIG, not created yet
			if p == "" {
				p = config.DefaultPath()
			}
			fmt.Fprintf(env.Stdout, "%s (not created yet; defaults in use)\n", p)
			return nil
		}
		fmt.Fprintln(env.Stdout, p)
	case "show":
		shown := *env.Config
		for _, secret := range []*string{&shown.LLM.APIKey, &shown.Serve.APIKey} {
			if *secret != "" {
				*secret = "(set, hidden)"
			}
		}
		data, err := shown.Encode()
		if err != nil {
			return err
		}
		env.Stdout.Write(data)
	case "keys":
		for _, k := range config.Keys() {
			fmt.Fprintf(env.Stdout, "%-32s %s\n", k, config.EnvName(k))
		}
	default:
		return usageError("config", "unknown config command %q (want path, show or keys)", args[0])
	}
	return nil
}
