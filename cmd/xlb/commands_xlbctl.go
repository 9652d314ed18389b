//go:build xlbctl

package main

import "github.com/urfave/cli/v2"

// xlbctl: this package built with -tags xlbctl. It holds the commands
// that talk to a running daemon over its control socket, the same code
// as xlb's, and none of the daemon's packages (GoBGP, client_golang,
// cilium/ebpf, the engine), whose initialization is most of what an xlb
// command costs before it does anything (docs/design.md, "Read commands
// at scale"). TestXlbctlBuild keeps it so.
const (
	progName        = "xlbctl"
	progUsage       = "the commands of xlb that talk to a running daemon, in a binary that starts in half the time"
	progDescription = "xlbctl is xlb's status, top, backend, appliance, reload, conntrack, lookup and capture, built\n" +
		"from the same source without the daemon's packages: the same flags, output and exit status.\n" +
		"Everything else (run, validate, restart, upgrade, stop, simulate, lab, decap, pktgen, k8s) is xlb's."
)

func commands() []*cli.Command {
	return []*cli.Command{
		statusCommand(),
		backendCommand(),
		applianceCommand(),
		reloadCommand(),
		conntrackCommand(),
		lookupCommand(),
		captureCommand(),
		topCommand(),
	}
}

// elsewhere says whether name is one of xlb's commands that xlbctl lacks.
func elsewhere(name string) bool {
	switch name {
	case "run", "validate", "restart", "upgrade", "stop", "simulate", "lab", "decap", "pktgen", "k8s":
		return true
	}
	return false
}
