// Command xlb-k8s is xlb's Kubernetes controller (pkg/k8s): what `xlb k8s`
// runs. It is a binary of its own so that client-go, which it alone
// needs, is not in the xlb binary: every package linked into a Go binary
// is initialized at each start, and client-go's were a third of the CPU
// of every short xlb command (xlb lookup, status) and two thirds of the
// binary (docs/design.md#kubernetes). `xlb k8s ARGS` executes
// `xlb-k8s ARGS` found beside the xlb binary (or in $PATH); `xlb-k8s ARGS`
// is the same command, for a unit that runs it directly. Its --help,
// flags, messages and exit status are those `xlb k8s` always had.
//
// # Files
//
//	main.go        the app (one command, k8s, as under xlb), exit status
//	controller.go  the command: flags, credentials, the controller's run
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
)

// defaultConfig is xlb's configuration file (cmd/xlb: the same default).
const defaultConfig = "/etc/xlb/xlb.toml"

func main() {
	if err := newApp(os.Stdout, os.Stderr).Run(commandLine(os.Args)); err != nil {
		fmt.Fprintf(os.Stderr, "xlb: %v\n", err)
		os.Exit(exitCode(err))
	}
}

// newApp is xlb's command tree with only the k8s command, so help and
// messages read as they do under xlb ("xlb k8s [command options]").
func newApp(stdout, stderr io.Writer) *cli.App {
	k := k8sCommand()
	k.OnUsageError = func(ctx *cli.Context, err error, isSub bool) error { return usageError{err.Error()} }
	return &cli.App{
		Name:         "xlb",
		Usage:        "the Kubernetes controller of xlb (xlb k8s)",
		Writer:       stdout,
		ErrWriter:    stderr,
		HideVersion:  true,
		Commands:     []*cli.Command{k},
		OnUsageError: func(c *cli.Context, err error, isSub bool) error { return usageError{err.Error()} },
	}
}

// commandLine is args as xlb's app reads them: the program, then k8s,
// then the arguments given.
func commandLine(args []string) []string {
	return append([]string{"xlb", "k8s"}, args[1:]...)
}

// usageError marks a mistake in how the command was called: exit status
// 2, as under xlb (cmd/xlb's exit status table).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func exitCode(err error) int {
	var u usageError
	var coder cli.ExitCoder
	switch {
	case errors.As(err, &u):
		return 2
	case errors.As(err, &coder) && coder.ExitCode() != 0:
		return coder.ExitCode()
	}
	return 1
}

func configFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "config", Aliases: []string{"c"}, Value: defaultConfig, Usage: "the appliance configuration `FILE` (rules are read from its rules_dir)"}
}
