//go:build !xlbctl

package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/daemon"
)

func simulateCommand() *cli.Command {
	return &cli.Command{
		Name:      "simulate",
		Usage:     "show the share of flows a backend change would move, without a running daemon",
		ArgsUsage: " ",
		Description: "Loads the configuration (and the state overlay, when readable), treats every backend as healthy\n" +
			"with its static or overlay weight (1 when none), builds each concerned rule's Maglev table before\n" +
			"and after the change, and prints per backend its share of new flows before and after and the share\n" +
			"of all flows that would move away from it. --flows also places N random client flows in both\n" +
			"tables. Tracked connections keep their backend whatever the table says (a removed or drained\n" +
			"backend's until its draining timeout).\n\n" +
			"Changes (repeatable, combined): --remove ADDR, --add ADDR (to the rule's first primary group),\n" +
			"--weight ADDR=N, --role ADDR=primary|failover.",
		Flags: []cli.Flag{
			configFlag(),
			ruleFlag(false),
			&cli.StringSliceFlag{Name: "remove", Usage: "remove backend `ADDR`"},
			&cli.StringSliceFlag{Name: "add", Usage: "add backend `ADDR`"},
			&cli.StringSliceFlag{Name: "weight", Usage: "give a backend a weight: `ADDR=N`"},
			&cli.StringSliceFlag{Name: "role", Usage: "mark a backend: `ADDR=ROLE` (primary or failover)"},
			&cli.IntFlag{Name: "flows", Value: 100000, Usage: "random flows to place (0: compare the tables only)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the random flows"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			changes, err := simChanges(c)
			if err != nil {
				return err
			}
			if c.Int("flows") < 0 {
				return usageError{fmt.Sprintf("--flows %d: want 0 or more", c.Int("flows"))}
			}
			cfg, _, err := config.Load(c.String("config"))
			if err != nil {
				return fmt.Errorf("simulate: %w", err)
			}
			st, err := config.LoadState(cfg.StateFile)
			if err != nil {
				fmt.Fprintf(c.App.ErrWriter, "warning: state overlay not applied: %v\n", err)
				st, _ = config.LoadState("")
			}
			res, err := daemon.Simulate(cfg, st, daemon.SimOptions{Rule: c.String("rule"), Changes: changes, Flows: c.Int("flows"), Seed: c.Uint64("seed")})
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c.App.Writer, res)
			}
			printSimulation(c.App.Writer, res)
			return nil
		},
	}
}

// simChanges turns the change flags into SimChanges.
func simChanges(c *cli.Context) ([]daemon.SimChange, error) {
	var out []daemon.SimChange
	parseAddr := func(flag, s string) (netip.Addr, error) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return a, usageError{fmt.Sprintf("--%s %q: not an IP address", flag, s)}
		}
		return a.Unmap(), nil
	}
	for _, s := range c.StringSlice("remove") {
		a, err := parseAddr("remove", s)
		if err != nil {
			return nil, err
		}
		out = append(out, daemon.SimChange{Kind: daemon.SimRemove, Addr: a})
	}
	for _, s := range c.StringSlice("add") {
		a, err := parseAddr("add", s)
		if err != nil {
			return nil, err
		}
		out = append(out, daemon.SimChange{Kind: daemon.SimAdd, Addr: a})
	}
	for _, s := range c.StringSlice("weight") {
		as, ns, ok := strings.Cut(s, "=")
		n, err := strconv.Atoi(ns)
		if !ok || err != nil || n < 0 || n > config.MaxWeight {
			return nil, usageError{fmt.Sprintf("--weight %q: want ADDR=N with N in 0..%d", s, config.MaxWeight)}
		}
		a, err := parseAddr("weight", as)
		if err != nil {
			return nil, err
		}
		out = append(out, daemon.SimChange{Kind: daemon.SimWeight, Addr: a, Weight: n})
	}
	for _, s := range c.StringSlice("role") {
		as, rs, ok := strings.Cut(s, "=")
		role, rok := config.ParseRole(rs)
		if !ok || !rok {
			return nil, usageError{fmt.Sprintf("--role %q: want ADDR=primary or ADDR=failover", s)}
		}
		a, err := parseAddr("role", as)
		if err != nil {
			return nil, err
		}
		out = append(out, daemon.SimChange{Kind: daemon.SimRole, Addr: a, Role: role})
	}
	if len(out) == 0 {
		return nil, usageError{"simulate: give a change: --remove, --add, --weight or --role"}
	}
	return out, nil
}
