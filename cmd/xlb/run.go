//go:build !xlbctl

package main

import (
	"context"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/xlbnet/xlb/pkg/daemon"
	"github.com/xlbnet/xlb/pkg/logflags"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run the appliance: attach to the interface and forward VIP traffic",
		ArgsUsage: " ",
		Description: "Loads the configuration (a bad one is refused before anything is attached), attaches the XDP\n" +
			"program (pinned under pin_dir, so it outlives the process), binds an AF_XDP socket per queue and\n" +
			"forwards until SIGTERM or SIGINT (or xlb stop), then detaches and removes the pins. A program\n" +
			"left pinned by a daemon that died is taken over (it dropped VIP packets meanwhile, never reset\n" +
			"them). SIGHUP re-reads the configuration and the state file; a configuration with errors is\n" +
			"rejected whole and the running one keeps serving. SIGUSR2 hands everything to a new process of\n" +
			"the same executable (as xlb restart). Needs root (CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW).\n" +
			"With " + pprofEnv + "=ADDR in the environment it also serves Go's profiles (/debug/pprof/)\n" +
			"on ADDR, e.g. 127.0.0.1:6060, for measuring the daemon (bench/README.md).",
		Flags: append([]cli.Flag{configFlag()}, logflags.Flags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError{fmt.Sprintf("run takes no arguments, got %q", c.Args().First())}
			}
			log, err := logflags.New(c, c.App.ErrWriter)
			if err != nil {
				return usageError{err.Error()}
			}
			if os.Geteuid() != 0 {
				log.Warn("not running as root: attaching XDP and binding AF_XDP sockets will likely fail")
			}
			if addr := os.Getenv(pprofEnv); addr != "" {
				servePprof(addr, log)
			}
			return daemon.Run(context.Background(), daemon.Options{
				ConfigPath: c.String("config"), Log: log, Signals: true,
				SuccessorArgs: []string{"--log-format", c.String("log-format"), "--log-level", c.String("log-level")},
			})
		},
	}
}
