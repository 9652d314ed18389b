//go:build !xlbctl

package main

import "github.com/urfave/cli/v2"

// The full build: the daemon and every tool. Built with -tags xlbctl,
// the same package is xlbctl (commands_xlbctl.go).
const (
	progName        = "xlb"
	progUsage       = "a userspace L4 passthrough load balancer on AF_XDP"
	progDescription = "xlb takes packets addressed to virtual IPs from AF_XDP sockets, places each flow on a backend\n" +
		"with connection tracking and weighted Maglev hashing, and encapsulates it towards the backend,\n" +
		"which answers the client directly."
)

func commands() []*cli.Command {
	return []*cli.Command{
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
		topCommand(),
		simulateCommand(),
		pktgenCommand(),
		k8sCommand(),
	}
}

// elsewhere: every command is here.
func elsewhere(string) bool { return false }
