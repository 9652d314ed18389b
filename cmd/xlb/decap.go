//go:build !xlbctl

package main

import (
	"context"
	"fmt"
	"net/netip"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/xlbnet/xlb/pkg/decap"
)

func decapCommand() *cli.Command {
	return &cli.Command{
		Name:      "decap",
		Usage:     "backend side: receive IPIP, GRE and GUE from xlb and hand the inner packets to the kernel",
		ArgsUsage: " ",
		Description: "For backends whose kernel has no ipip, ip6tnl, gre or fou modules. Receives IPIP and GRE on raw\n" +
			"sockets and GUE on UDP, and writes each inner packet to a TUN device, so the kernel delivers it\n" +
			"to the sockets bound to the VIP. Puts the VIPs on lo and turns rp_filter off (the inner source is\n" +
			"the client, whose route is elsewhere) unless --no-host-config. Runs until SIGTERM or SIGINT and\n" +
			"prints its counters every --stats interval. Where the kernel has the modules, use\n" +
			"deploy/backend-setup.sh instead.",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "vip", Usage: "a VIP this backend serves (repeat for several)"},
			&cli.StringSliceFlag{Name: "encap", Value: cli.NewStringSlice("IPIP", "GRE", "GUE"), Usage: "encapsulations to receive"},
			&cli.UintFlag{Name: "gue-port", Value: decap.DefaultGUEPort, Usage: "UDP port GUE arrives on"},
			&cli.StringFlag{Name: "tun", Value: decap.DefaultTUN, Usage: "name of the TUN device to create"},
			&cli.BoolFlag{Name: "ipv4-only", Usage: "no IPv6 sockets (hosts with IPv6 disabled)"},
			&cli.BoolFlag{Name: "no-host-config", Usage: "leave lo and rp_filter alone"},
			&cli.DurationFlag{Name: "stats", Value: time.Minute, Usage: "how often to print the counters (0: never)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError{fmt.Sprintf("decap takes no arguments, got %q", c.Args().First())}
			}
			o := decap.Options{TUN: c.String("tun"), GUEPort: uint16(c.Uint("gue-port")), IPv4Only: c.Bool("ipv4-only"), NoHostConfig: c.Bool("no-host-config"),
				Logf: func(f string, a ...any) { fmt.Fprintf(c.App.ErrWriter, f+"\n", a...) }}
			if c.Uint("gue-port") == 0 || c.Uint("gue-port") > 65535 {
				return usageError{fmt.Sprintf("--gue-port %d: want 1..65535", c.Uint("gue-port"))}
			}
			for _, s := range c.StringSlice("vip") {
				a, err := netip.ParseAddr(s)
				if err != nil {
					return usageError{fmt.Sprintf("--vip %q: %v", s, err)}
				}
				o.VIPs = append(o.VIPs, a)
			}
			for _, s := range c.StringSlice("encap") {
				e, err := decap.ParseEncap(s)
				if err != nil {
					return usageError{fmt.Sprintf("--encap %q: %v", s, err)}
				}
				o.Encaps = append(o.Encaps, e)
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			d, err := decap.Start(o)
			if err != nil {
				return err
			}
			var tick <-chan time.Time
			if iv := c.Duration("stats"); iv > 0 {
				t := time.NewTicker(iv)
				defer t.Stop()
				tick = t.C
			}
			for {
				select {
				case <-ctx.Done():
					fmt.Fprintf(c.App.ErrWriter, "decap: stopping: %v\n", d.Counters())
					return d.Close()
				case <-d.Failed():
					return d.Close()
				case <-tick:
					fmt.Fprintf(c.App.ErrWriter, "decap: %v\n", d.Counters())
				}
			}
		},
	}
}
