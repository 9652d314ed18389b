package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
)

// usageError marks a mistake in how a command was called (exit status 2,
// as for flag errors); every other error exits 1.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// newApp builds the command tree. Output goes to stdout and stderr so
// tests can run commands in-process.
func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:  "xlb",
		Usage: "a userspace L4 passthrough load balancer on AF_XDP",
		Description: "xlb takes packets addressed to virtual IPs from AF_XDP sockets, places each flow on a backend\n" +
			"with connection tracking and weighted Maglev hashing, and encapsulates it towards the backend,\n" +
			"which answers the client directly.",
		Writer:      stdout,
		ErrWriter:   stderr,
		HideVersion: true,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError{fmt.Sprintf("unknown command %q (see 'xlb --help')", c.Args().First())}
			}
			return cli.ShowAppHelp(c)
		},
		Commands: []*cli.Command{
			runCommand(),
			decapCommand(),
			labCommand(),
			validateCommand(),
			statusCommand(),
			backendCommand(),
			applianceCommand(),
			reloadCommand(),
			restartCommand(),
			upgradeCommand(),
			stopCommand(),
			conntrackCommand(),
			lookupCommand(),
			captureCommand(),
			simulateCommand(),
			pktgenCommand(),
		},
		OnUsageError: func(c *cli.Context, err error, isSub bool) error {
			return usageError{err.Error()}
		},
	}
	for _, c := range app.Commands {
		setUsageErrors(c)
	}
	return app
}

// setUsageErrors makes flag errors of every subcommand exit with status 2.
func setUsageErrors(c *cli.Command) {
	c.OnUsageError = func(ctx *cli.Context, err error, isSub bool) error { return usageError{err.Error()} }
	for _, s := range c.Subcommands {
		setUsageErrors(s)
	}
}
