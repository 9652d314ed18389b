//go:build !xlbctl

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/xlbnet/xlb/pkg/lab"
)

func labFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "prefix", Value: lab.DefaultPrefix, Usage: "prefix of every namespace the lab creates"},
		&cli.IntFlag{Name: "backends", Value: lab.DefaultBackends, Usage: "number of backends"},
		&cli.IntFlag{Name: "appliances", Value: 1, Usage: fmt.Sprintf("number of appliances (1..%d); more than one puts a BGP daemon (--router) on the router: eBGP to each, ECMP over them", lab.MaxAppliances)},
		&cli.StringFlag{Name: "router", Value: lab.RouterBIRD, Usage: "the router's BGP daemon with more than one appliance: bird (BIRD 2) or frr (FRR's zebra and bgpd, apt-get install frr; implies BGP)"},
		&cli.IntFlag{Name: "queues", Value: lab.DefaultQueues, Usage: "RX/TX queues of the appliance's veth"},
		&cli.IntFlag{Name: "clients", Value: lab.DefaultClientAddrs, Usage: "client source addresses per family"},
		&cli.IntFlag{Name: "fabric-mtu", Value: lab.DefaultFabricMTU, Usage: "MTU between router, appliance and backends"},
		&cli.IntFlag{Name: "client-mtu", Value: lab.DefaultClientMTU, Usage: "MTU of the client's link"},
	}
}

// labOptions reads the lab flags. Zero means "the default" to lab.Up, so
// a flag given as 0 (or less) is refused here instead of silently taken
// as the default.
func labOptions(c *cli.Context, out func(string, ...any)) (lab.Options, error) {
	for _, f := range []struct {
		name     string
		min, max int
	}{
		{"backends", 1, lab.MaxBackends}, {"appliances", 1, lab.MaxAppliances}, {"queues", 1, 256},
		{"clients", 1, lab.MaxClientAddrs}, {"fabric-mtu", 1280, 65535}, {"client-mtu", 1280, 65535},
	} {
		if v := c.Int(f.name); v < f.min || v > f.max {
			return lab.Options{}, usageError{fmt.Sprintf("--%s %d: want %d..%d", f.name, v, f.min, f.max)}
		}
	}
	if r := c.String("router"); r != lab.RouterBIRD && r != lab.RouterFRR {
		return lab.Options{}, usageError{fmt.Sprintf("--router %s: want %s or %s", r, lab.RouterBIRD, lab.RouterFRR)}
	}
	return lab.Options{
		Prefix: c.String("prefix"), Backends: c.Int("backends"), Appliances: c.Int("appliances"), Router: c.String("router"), Queues: c.Int("queues"),
		ClientAddrs: c.Int("clients"), FabricMTU: c.Int("fabric-mtu"), ClientMTU: c.Int("client-mtu"),
		Logf: out,
	}, nil
}

func encapFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "encap", Value: "IPIP", Usage: "encapsulation towards the backends: IPIP, GUE, GRE or DIRECT"}
}

func checkEncap(s string) (string, error) {
	s = strings.ToUpper(s)
	switch s {
	case "IPIP", "GUE", "GRE", "DIRECT":
		return s, nil
	}
	return "", usageError{fmt.Sprintf("--encap %q: want IPIP, GUE, GRE or DIRECT", s)}
}

func requireRoot() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the lab needs root (network namespaces, veth, XDP)")
	}
	return nil
}

func labCommand() *cli.Command {
	return &cli.Command{
		Name:  "lab",
		Usage: "a network-namespace testbed with real clients and backends",
		Description: "Namespaces <prefix>client (hundreds of source addresses), <prefix>router, <prefix>xlb (the\n" +
			"appliance, one-armed) and <prefix>be0… (backends with HTTP and UDP echo servers bound to the VIPs,\n" +
			"answering clients directly). Addresses are documentation ranges only (198.18.0.0/15,\n" +
			"198.51.100.0/24, 203.0.113.0/24, fd00::/8). With --appliances N (a fleet) there are N appliances\n" +
			"(<prefix>xlb, <prefix>xlb1, …) and the router runs BIRD 2 (apt-get install bird2), or FRR with\n" +
			"--router frr (apt-get install frr): eBGP to each, one ECMP route per VIP hashed on the 5-tuple;\n" +
			"the demo prints what each appliance carried.",
		Subcommands: []*cli.Command{
			{
				Name:  "demo",
				Usage: "build the lab, run xlb on it, drive HTTP requests from many clients, print where they went, tear down",
				Description: "Exits 0 when every request succeeded and every backend saw the client's own address.\n" +
					"Ctrl-C stops it at any point and still removes everything it created.",
				Flags: append(labFlags(), encapFlag(),
					&cli.IntFlag{Name: "requests", Value: 3000, Usage: "HTTP requests to drive"},
					&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "show xlb's log lines"},
				),
				Action: labDemo,
			},
			{
				Name:  "up",
				Usage: "build the lab and run its servers in the foreground until Ctrl-C (then tear it down)",
				Description: "Builds the namespaces and starts the backends' servers (they live in this process). With\n" +
					"--xlb it also runs xlb on the appliance. Run commands in it with `ip netns exec <prefix>client …`.",
				Flags:  append(labFlags(), encapFlag(), &cli.BoolFlag{Name: "xlb", Usage: "also run xlb on the appliance"}),
				Action: labUp,
			},
			{
				Name:  "down",
				Usage: "remove the namespaces of a lab (after a crash, or a lab up in another terminal)",
				Description: "Removes only the names a lab creates: <prefix>client, router, xlb, xlb1…, be0…; another\n" +
					"namespace that merely starts with the prefix is left alone. Prints each one it removed.",
				ArgsUsage: " ",
				Flags:     []cli.Flag{&cli.StringFlag{Name: "prefix", Value: lab.DefaultPrefix, Usage: "prefix of the lab's namespaces"}},
				Action: func(c *cli.Context) error {
					if err := noArgs(c); err != nil {
						return err
					}
					if err := requireRoot(); err != nil {
						return err
					}
					removed, err := lab.Down(c.String("prefix"))
					for _, name := range removed {
						fmt.Fprintf(c.App.Writer, "removed namespace %s\n", name)
					}
					if err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "removed %d namespace(s) of lab %q\n", len(removed), c.String("prefix"))
					return nil
				},
			},
		},
	}
}

func labDemo(c *cli.Context) error {
	if err := requireRoot(); err != nil {
		return err
	}
	encap, err := checkEncap(c.String("encap"))
	if err != nil {
		return err
	}
	out := c.App.Writer
	say := func(f string, a ...any) { fmt.Fprintf(out, f+"\n", a...) }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "xlb-lab-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var logf func(string)
	if c.Bool("verbose") {
		logf = func(s string) { fmt.Fprintln(c.App.ErrWriter, "xlb: "+s) }
	}
	opts, err := labOptions(c, say)
	if err != nil {
		return err
	}
	return lab.Demo(ctx, lab.DemoOptions{
		Lab:   opts,
		Drive: lab.DriveOptions{Requests: c.Int("requests")},
		Out:   out,
		Start: func(ctx context.Context, l *lab.Lab) (func() error, error) {
			xs, err := startLabFleet(ctx, l, dir, l.DefaultRules(encap), say, logf)
			if err != nil {
				return nil, err
			}
			// Driving before the first round of health checks would
			// measure the start-up set, not the balance.
			for _, x := range xs {
				if err := x.waitRulesHealthy(ctx, time.Minute, say); err != nil {
					stopLabFleet(xs)
					return nil, err
				}
			}
			say("lab %s: xlb serves VIPs %s and %s", l.Opts.Prefix, l.Opts.VIP4, l.Opts.VIP6)
			return func() error { return stopLabFleet(xs) }, nil
		},
	})
}

func labUp(c *cli.Context) error {
	if err := requireRoot(); err != nil {
		return err
	}
	encap, err := checkEncap(c.String("encap"))
	if err != nil {
		return err
	}
	say := func(f string, a ...any) { fmt.Fprintf(c.App.Writer, f+"\n", a...) }
	opts, err := labOptions(c, say)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	l, err := lab.Up(ctx, opts)
	if err != nil {
		return err
	}
	defer l.Close()
	dir, err := os.MkdirTemp("", "xlb-lab-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if c.Bool("xlb") {
		xs, err := startLabFleet(ctx, l, dir, l.DefaultRules(encap), say, func(s string) { fmt.Fprintln(c.App.ErrWriter, "xlb: "+s) })
		if err != nil {
			return err
		}
		defer stopLabFleet(xs)
	}
	if err := l.Describe(c.App.Writer); err != nil {
		return err
	}
	if !c.Bool("xlb") {
		if err := printRunLines(c.App.Writer, l, dir, encap); err != nil {
			return err
		}
	}
	say("lab %s is up; Ctrl-C tears it down.", l.Opts.Prefix)
	<-ctx.Done()
	say("tearing down")
	return nil
}

// startLabFleet starts xlb on every appliance of the lab, each with its own
// directory under dir (configuration, state file, control socket).
func startLabFleet(ctx context.Context, l *lab.Lab, dir string, rules []lab.Rule, say func(string, ...any), logf func(string)) ([]*labXLB, error) {
	var xs []*labXLB
	for _, a := range l.Appliances {
		adir := filepath.Join(dir, a.NS.Name)
		say("lab %s: starting xlb on %s (%d rules, %d backends)", l.Opts.Prefix, a.NS.Name, len(rules), len(l.Backends))
		var alog func(string)
		if logf != nil {
			alog = func(s string) { logf(a.NS.Name + ": " + s) }
		}
		x, err := startLabXLBOn(ctx, l, a, adir, rules, alog)
		if err != nil {
			stopLabFleet(xs)
			return nil, err
		}
		say("xlb runs in %s with %s", a.NS.Name, x.config)
		xs = append(xs, x)
	}
	return xs, nil
}

// stopLabFleet stops every daemon and returns the first error.
func stopLabFleet(xs []*labXLB) error {
	var first error
	for _, x := range xs {
		if err := x.Stop(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// printRunLines writes a ready configuration for every appliance of the
// lab (under dir, removed with the lab) and prints the command that runs
// xlb on each, and how to reach it.
func printRunLines(w io.Writer, l *lab.Lab, dir, encap string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, a := range l.Appliances {
		cfg, err := l.WriteConfig(filepath.Join(dir, a.NS.Name), l.DefaultRules(encap))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "configuration for %s: %s (rules %s, %s encapsulation)\n", a.NS.Name, cfg, filepath.Join(filepath.Dir(cfg), "rules.d"), encap)
		fmt.Fprintf(w, "run xlb on it:   ip netns exec %s %s run -c %s\n", a.NS.Name, self, cfg)
		fmt.Fprintf(w, "then ask it:     %s status -c %s\n", self, cfg)
	}
	return nil
}
