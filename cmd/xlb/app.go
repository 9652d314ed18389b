package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/xlbnet/xlb/pkg/buildinfo"
)

// Exit status, one rule for every command (printed by xlb --help):
const exitStatusHelp = `EXIT STATUS:
   0  success (also --help)
   1  the operation failed or was refused: the daemon answered with an error
      (an unknown rule or backend, a rejected reload, a read-only socket), it
      cannot be reached, or a configuration is invalid
   2  the command was called wrongly: an unknown flag, a missing or extra
      argument, a value out of range
   3  an unknown command or subcommand (urfave/cli's help convention)`

// usageError marks a mistake in how a command was called (exit status 2,
// as for flag errors).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// unknownCommandError is a command or subcommand that does not exist
// (exit status 3, as urfave/cli's "No help topic").
type unknownCommandError struct{ msg string }

func (e unknownCommandError) Error() string { return e.msg }

// exitCode maps an error to the exit status (exitStatusHelp).
func exitCode(err error) int {
	var u usageError
	var unknown unknownCommandError
	var coder cli.ExitCoder
	switch {
	case errors.As(err, &u):
		return 2
	case errors.As(err, &unknown):
		return 3
	case errors.As(err, &coder) && coder.ExitCode() != 0:
		return coder.ExitCode()
	}
	return 1
}

// unknownCommand is the error for an argument of c that names no
// subcommand.
func unknownCommand(c *cli.Context) error {
	path := progName
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		path = progName + " " + c.Command.FullName()
	}
	if path == progName && elsewhere(c.Args().First()) {
		return unknownCommandError{fmt.Sprintf("%q is a command of xlb, not of %s (which holds the commands that talk to a running daemon)", c.Args().First(), progName)}
	}
	return unknownCommandError{fmt.Sprintf("unknown command %q for %q (see '%s --help')", c.Args().First(), path, path)}
}

// newApp builds the command tree. Output goes to stdout and stderr so
// tests can run commands in-process.
func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:        progName,
		Usage:       progUsage,
		Description: progDescription + "\n\n" + exitStatusHelp,
		Writer:      stdout,
		ErrWriter:   stderr,
		// xlb --version: the module version and VCS revision (pkg/buildinfo).
		Version: buildinfo.Read().Short(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return unknownCommand(c)
			}
			return cli.ShowAppHelp(c)
		},
		Commands: commands(),
		OnUsageError: func(c *cli.Context, err error, isSub bool) error {
			return usageError{err.Error()}
		},
	}
	for _, c := range app.Commands {
		setUsageErrors(c)
	}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, buildinfo.Read().String()) }
	return app
}

// setUsageErrors makes flag errors of every subcommand exit with status 2
// and an unknown subcommand with 3 (every command with subcommands gets an
// action that says so, or shows its help when called alone).
func setUsageErrors(c *cli.Command) {
	c.OnUsageError = func(ctx *cli.Context, err error, isSub bool) error { return usageError{err.Error()} }
	if len(c.Subcommands) > 0 && c.Action == nil {
		c.Action = func(ctx *cli.Context) error {
			if ctx.NArg() > 0 {
				return unknownCommand(ctx)
			}
			return cli.ShowSubcommandHelp(ctx)
		}
	}
	for _, s := range c.Subcommands {
		setUsageErrors(s)
	}
}

// runApp runs the command line args (args[0] is the program's name) with
// flags allowed after positional arguments (docs/design.md#command-line):
// urfave/cli/v2, like package flag, stops parsing flags at the first
// argument that is not one, so `xlb backend drain -r web 10.0.0.1 --json`
// would take --json for a second address. runApp moves the flags of the
// command being run in front of its arguments; after "--" everything is
// an argument.
func runApp(app *cli.App, args []string) error {
	return app.Run(interspersed(app, args))
}

// interspersed returns args with the final command's flags (and their
// values) before its positional arguments.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	cmds, flags := app.Commands, app.Flags
	var last *cli.Command
	i := 1
	for ; i < len(args); i++ {
		c := findCommand(cmds, args[i])
		if c == nil {
			break
		}
		out = append(out, args[i])
		cmds, flags, last = c.Subcommands, c.Flags, c
	}
	if len(cmds) > 0 || len(out) == 1 {
		return args // not a leaf command: leave the parsing to urfave/cli
	}
	if last.SkipFlagParsing {
		return args // its arguments are another program's (xlb k8s)
	}
	var fl, pos, tail []string
	rest := args[i:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		switch {
		case a == "--":
			tail = rest[j:]
			j = len(rest)
		case len(a) > 1 && a[0] == '-':
			fl = append(fl, a)
			if !strings.Contains(a, "=") && takesValue(flags, strings.TrimLeft(a, "-")) && j+1 < len(rest) {
				fl = append(fl, rest[j+1])
				j++
			}
		default:
			pos = append(pos, a)
		}
	}
	if len(tail) > 0 {
		// "--" ends the flags: the arguments before it go after it.
		return append(append(append(append(out, fl...), "--"), pos...), tail[1:]...)
	}
	return append(append(out, fl...), pos...)
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// takesValue reports whether the flag called name (without dashes) takes
// a value: every flag but a boolean one. Unknown flags take none (urfave
// reports them).
func takesValue(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}
