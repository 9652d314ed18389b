//go:build !xlbctl

package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/xlbnet/xlb/pkg/config"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check a configuration and its rule files without running anything",
		ArgsUsage: " ",
		Description: "Loads xlb.toml and every rules_dir/*.toml, reports every error and warning with file, line and\n" +
			"key, and exits 1 when there is an error. Warnings (for example a UDP rule that is not\n" +
			"fragment-safe) do not fail the check. It also checks what xlb run would need: the state file\n" +
			"(state_file, the CLI's changes: an error names what removing it would drop) and, unless\n" +
			"--offline, this machine (the interface, the listed queues among its active ones, the control\n" +
			"socket's group), so that ExecStartPre fails where xlb run would.",
		Flags: []cli.Flag{configFlag(), &cli.BoolFlag{Name: "offline", Usage: "check the files only, not this machine (a configuration for another appliance)"}},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError{fmt.Sprintf("validate takes no arguments, got %q", c.Args().First())}
			}
			cfg, warnings, err := config.Load(c.String("config"))
			for _, w := range warnings {
				fmt.Fprintf(c.App.ErrWriter, "warning: %s\n", w)
			}
			if err != nil {
				var cerr *config.Error
				if errors.As(err, &cerr) {
					for _, i := range cerr.Issues {
						fmt.Fprintf(c.App.ErrWriter, "error: %s\n", i)
					}
					return fmt.Errorf("%s: %d error(s); the configuration was not accepted", c.String("config"), len(cerr.Issues))
				}
				return err
			}
			var host []config.Issue
			if !c.Bool("offline") {
				host = config.CheckHost(cfg)
			}
			for _, i := range host {
				fmt.Fprintf(c.App.ErrWriter, "error: %s\n", i)
			}
			if _, err := config.LoadState(cfg.StateFile); err != nil {
				var serr *config.StateFileError
				if !errors.As(err, &serr) {
					return err
				}
				for _, i := range serr.Err.Issues {
					fmt.Fprintf(c.App.ErrWriter, "error: %s\n", i)
				}
				return fmt.Errorf("state file %s: %d error(s): fix it, or remove it and lose %s", cfg.StateFile, len(serr.Err.Issues), serr.Loss)
			}
			if len(host) > 0 {
				return fmt.Errorf("%s: %d error(s) on this machine; xlb run would fail (--offline checks the files only)", c.String("config"), len(host))
			}
			// A backend service's backends count once, whatever the
			// number of rules naming it.
			backends := 0
			for _, r := range cfg.Rules {
				if r.Service == "" {
					backends += r.BackendCount()
				}
			}
			for _, s := range cfg.Services {
				for _, g := range s.Groups {
					backends += len(g.Backends)
				}
			}
			fmt.Fprintf(c.App.Writer, "%s: ok: %d rule(s), %d backend service(s), %d backend(s), %d warning(s)\n",
				cfg.Path, len(cfg.Rules), len(cfg.Services), backends, len(warnings))
			return nil
		},
	}
}
