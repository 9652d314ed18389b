//go:build !xlbctl

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"
)

// k8sBinary is the Kubernetes controller's executable: a binary of its
// own (cmd/xlb-k8s), so that client-go is not initialized by every xlb
// command (docs/design.md#kubernetes).
const k8sBinary = "xlb-k8s"

// k8sCommand is `xlb k8s`: it executes xlb-k8s with the same arguments
// (--help included: the controller's flags and help live there).
func k8sCommand() *cli.Command {
	return &cli.Command{
		Name:            "k8s",
		Usage:           "run the Kubernetes controller: LoadBalancer Services become rule files of this appliance",
		ArgsUsage:       "[options: xlb k8s --help]",
		Description:     "Runs " + k8sBinary + " (the controller, a binary of its own) found beside this xlb binary, else in $PATH.",
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			path, err := findK8sBinary()
			if err != nil {
				return err
			}
			// Exec, not a child: the controller keeps xlb's process, so a
			// unit's signals and exit status are its own.
			if err := execProgram(path, append([]string{path}, c.Args().Slice()...), os.Environ()); err != nil {
				return fmt.Errorf("run %s: %w", path, err)
			}
			return nil
		},
	}
}

// executable is this binary's path and execProgram replaces the process
// (variables for tests, which run commands in-process).
var (
	executable  = os.Executable
	execProgram = syscall.Exec
)

// findK8sBinary returns xlb-k8s beside this executable (symbolic links
// resolved), else from $PATH, else an error that says where it looked.
func findK8sBinary() (string, error) {
	var beside string
	if exe, err := executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		beside = filepath.Join(filepath.Dir(exe), k8sBinary)
		if fi, err := os.Stat(beside); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return beside, nil
		}
	}
	if p, err := exec.LookPath(k8sBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("the Kubernetes controller is the binary %s, not found at %s nor in $PATH (%s): build it with `go build ./cmd/xlb-k8s` and install it beside xlb (deploy/kubernetes.md)", k8sBinary, beside, os.Getenv("PATH"))
}
