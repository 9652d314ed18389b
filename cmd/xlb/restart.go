//go:build !xlbctl

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/ring/xsk"
)

// The commands that replace or stop the daemon itself.

func restartCommand() *cli.Command {
	return &cli.Command{
		Name:      "restart",
		Usage:     "hand the running daemon's work to a new process of the same executable, keeping every connection",
		ArgsUsage: " ",
		Description: "The daemon starts its successor with -c FILE and hands it the AF_XDP sockets, the UMEM, the\n" +
			"conntrack tables and its state (slots, generations, failover, health verdicts, next hops); the\n" +
			"successor prepares while the daemon keeps forwarding, then each worker hands over between two\n" +
			"batches (a pause of milliseconds, buffered by the RX rings). Nothing is detached. A successor that\n" +
			"fails (an invalid FILE, say) leaves the daemon serving, untouched, and this command exits 1 with\n" +
			"the reason. The daemon serves on meanwhile, and refuses reloads and backend changes until the\n" +
			"restart is done. Also SIGUSR2 to the daemon (with its own configuration).",
		Flags: append(socketFlags(), jsonFlag()),
		Action: func(c *cli.Context) error {
			return restart(c, "")
		},
	}
}

func upgradeCommand() *cli.Command {
	return &cli.Command{
		Name:      "upgrade",
		Usage:     "hand the running daemon's work to another build of xlb, keeping every connection",
		ArgsUsage: " ",
		Description: "As xlb restart, with --binary PATH as the successor's executable. The new program is swapped\n" +
			"into the pinned XDP link with the maps kept (new maps, with the VIP set copied, when a map's\n" +
			"layout changed); a conntrack table whose layout changed starts empty, and the answer says so.",
		Flags: append(socketFlags(), jsonFlag(), &cli.StringFlag{Name: "binary", Usage: "the new xlb executable `PATH` (required)"}),
		Action: func(c *cli.Context) error {
			if c.String("binary") == "" {
				return usageError{"upgrade needs --binary PATH"}
			}
			bin, err := filepath.Abs(c.String("binary"))
			if err != nil {
				return err
			}
			if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return fmt.Errorf("--binary %s is not an executable file", bin)
			}
			return restart(c, bin)
		},
	}
}

func restart(c *cli.Context, binary string) error {
	if err := noArgs(c); err != nil {
		return err
	}
	cfg, err := filepath.Abs(c.String("config"))
	if err != nil {
		return err
	}
	// The daemon allows its successor 5 minutes to prepare.
	return withClientFor(c, 6*time.Minute, func(ctx context.Context, cl *control.Client) error {
		res, err := cl.Restart(ctx, control.RestartRequest{Config: cfg, Binary: binary})
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, res)
		}
		fmt.Fprintf(c.App.Writer, "handed over to pid %d (build %s): %d queues, pause %.1f ms, state version %d\n",
			res.PID, res.Build, res.Queues, res.PauseMS, res.StateVersion)
		for _, n := range res.Notes {
			fmt.Fprintf(c.App.Writer, "note: %s\n", n)
		}
		return nil
	})
}

func stopCommand() *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "stop the appliance: detach the XDP program and remove its pins",
		ArgsUsage: " ",
		Description: "Asks the daemon to stop for good: it detaches the XDP program, removes its pins, closes its\n" +
			"sockets and exits (VIP traffic goes to the kernel again). When no daemon answers (it crashed and\n" +
			"left the program attached, dropping VIP packets), removes the pins of interface and pin_dir of\n" +
			"the configuration itself. Run it in the daemon's network namespace.",
		Flags: append(socketFlags(), jsonFlag()),
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			var res *control.StopResult
			err := withClient(c, func(ctx context.Context, cl *control.Client) (err error) {
				res, err = cl.Stop(ctx)
				return err
			})
			var ce *control.Error
			if err != nil && errors.As(err, &ce) {
				return err
			}
			if err != nil {
				// No daemon: remove what a crashed one left.
				dir, perr := pinDirOf(c.String("config"))
				if perr != nil {
					return fmt.Errorf("%v; and the pins cannot be found: %w", err, perr)
				}
				if rerr := xsk.RemovePins(dir); rerr != nil {
					return fmt.Errorf("%v; remove the pins in %s: %w", err, dir, rerr)
				}
				res = &control.StopResult{Detached: true, PinDir: dir}
				fmt.Fprintf(c.App.ErrWriter, "xlb: %v: removed the pins instead\n", err)
			}
			if c.Bool("json") {
				return printJSON(c.App.Writer, res)
			}
			fmt.Fprintf(c.App.Writer, "stopped: xdp program detached, pins removed (%s)\n", res.PinDir)
			return nil
		},
	}
}

// pinDirOf is the pins' directory of the configuration at path, in this
// network namespace.
func pinDirOf(path string) (string, error) {
	root, ifname, err := config.PinRoot(path)
	if err != nil {
		return "", err
	}
	return xsk.PinDir(root, ifname)
}
