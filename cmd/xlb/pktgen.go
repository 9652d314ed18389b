//go:build !xlbctl

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/xlbnet/xlb/pkg/pktgen"
)

func pktgenCommand() *cli.Command {
	return &cli.Command{
		Name:      "pktgen",
		Usage:     "send generated traffic from AF_XDP TX queues (the kernel's pktgen where it is missing)",
		ArgsUsage: " ",
		Description: "Transmit-only AF_XDP generator: one thread per TX queue, pinned to a CPU (queue = CPU =\n" +
			"--first-thread + i, like pktgen's QUEUE_MAP_CPU). Frames are built once and only the varying\n" +
			"fields (addresses, ports) and checksums are written per packet. Address flags take an address,\n" +
			"a CIDR block or FIRST-LAST; port flags N or MIN-MAX. Without --flows each packet draws its\n" +
			"varying fields at random (pktgen's *_RND); with --flows N the run cycles through N distinct\n" +
			"flows, --flowlen packets each (pktgen's flows/flowlen with FLOW_SEQ). --size is the frame\n" +
			"length without FCS (pktgen's pkt_size: 60 is a minimum Ethernet frame). Prints pktgen's\n" +
			"'Device:' and 'Result: OK:' lines per thread, or one JSON object with --json. No XDP program\n" +
			"is needed on the interface: a transmit-only socket has nothing to redirect. Needs root.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dev", Aliases: []string{"i"}, Usage: "output `INTERFACE` (required)"},
			&cli.StringFlag{Name: "dst", Aliases: []string{"d"}, Value: "198.18.0.42", Usage: "destination `ADDRESS|CIDR|FIRST-LAST` (IPv6 sends IPv6)"},
			&cli.StringFlag{Name: "src", Usage: "source `ADDRESS|CIDR|FIRST-LAST` (default: the interface's first address of the destination's family, else 0.0.0.0 or ::)"},
			&cli.StringFlag{Name: "dst-mac", Aliases: []string{"m"}, Usage: "destination `MAC` (required)"},
			&cli.StringFlag{Name: "src-mac", Usage: "source `MAC` (default: the interface's)"},
			&cli.StringFlag{Name: "dst-port", Aliases: []string{"p"}, Value: "9", Usage: "destination `PORT|MIN-MAX`"},
			&cli.StringFlag{Name: "src-port", Value: "9", Usage: "source `PORT|MIN-MAX`"},
			&cli.StringFlag{Name: "proto", Value: "udp", Usage: "`udp`, tcp-syn or tcp-ack"},
			&cli.IntFlag{Name: "size", Aliases: []string{"s"}, Value: 60, Usage: "frame `BYTES` without FCS (raised to the headers' size)"},
			&cli.BoolFlag{Name: "udp-csum", Aliases: []string{"k"}, Usage: "fill the UDP checksum of IPv4 datagrams (IPv6 and TCP always carry one)"},
			&cli.IntFlag{Name: "flows", Usage: "send `N` distinct flows in turn (0: random fields per packet)"},
			&cli.IntFlag{Name: "flowlen", Value: 1, Usage: "`PACKETS` per flow before the next (with --flows)"},
			&cli.IntFlag{Name: "threads", Aliases: []string{"t"}, Value: 1, Usage: "sending `THREADS`, one TX queue each"},
			&cli.IntFlag{Name: "first-thread", Aliases: []string{"f"}, Usage: "queue and CPU `INDEX` of the first thread"},
			&cli.Uint64Flag{Name: "count", Aliases: []string{"n"}, Usage: "`PACKETS` per thread (0: until --duration or Ctrl-C)"},
			&cli.DurationFlag{Name: "duration", Usage: "stop after `DURATION` (0: no limit)"},
			&cli.Float64Flag{Name: "rate", Usage: "`PPS` per thread (0: as fast as possible)"},
			&cli.Int64Flag{Name: "delay", Aliases: []string{"w"}, Usage: "`NS` between packets per thread, pktgen's delay (overrides --rate)"},
			&cli.IntFlag{Name: "batch", Aliases: []string{"b"}, Value: 64, Usage: "descriptors per TX `BATCH` (pktgen's burst)"},
			&cli.StringFlag{Name: "bind", Value: "auto", Usage: "`auto` (zero-copy, else copy), copy or zerocopy"},
			&cli.Int64Flag{Name: "seed", Usage: "`SEED` of the random fields"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of pktgen's lines"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError{fmt.Sprintf("pktgen takes no arguments, got %q", c.Args().First())}
			}
			cfg, err := pktgenConfig(c)
			if err != nil {
				return err
			}
			if !c.Bool("json") {
				fmt.Fprintln(c.App.ErrWriter, "Running... ctrl^C to stop")
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := pktgen.Run(ctx, cfg)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return json.NewEncoder(c.App.Writer).Encode(rep.JSON())
			}
			return rep.WriteText(c.App.Writer)
		},
	}
}

// pktgenConfig turns the flags into a pktgen.Config; every mistake is a
// usage error (exit 2).
func pktgenConfig(c *cli.Context) (pktgen.Config, error) {
	var cfg pktgen.Config
	cfg.Ifname = c.String("dev")
	if cfg.Ifname == "" {
		return cfg, usageError{"pktgen: --dev (-i) is required: the output interface"}
	}
	ifi, err := net.InterfaceByName(cfg.Ifname)
	if err != nil {
		return cfg, usageError{fmt.Sprintf("pktgen: interface %q: %v", cfg.Ifname, err)}
	}
	if cfg.Dst, err = pktgen.ParseAddrRange(c.String("dst")); err != nil {
		return cfg, usageError{"pktgen: --dst: " + err.Error()}
	}
	if s := c.String("src"); s != "" {
		if cfg.Src, err = pktgen.ParseAddrRange(s); err != nil {
			return cfg, usageError{"pktgen: --src: " + err.Error()}
		}
	} else {
		a, err := ifaceAddr(ifi, cfg.Dst.First.Is6())
		if err != nil {
			return cfg, err
		}
		cfg.Src = pktgen.AddrRange{First: a, Last: a}
	}
	if cfg.DstMAC, err = net.ParseMAC(c.String("dst-mac")); err != nil {
		return cfg, usageError{fmt.Sprintf("pktgen: --dst-mac (-m) %q: want a MAC address", c.String("dst-mac"))}
	}
	// An interface without an Ethernet address (lo) sends from the zero
	// MAC, as the kernel's pktgen does.
	cfg.SrcMAC = ifi.HardwareAddr
	if len(cfg.SrcMAC) != 6 {
		cfg.SrcMAC = make(net.HardwareAddr, 6)
	}
	if s := c.String("src-mac"); s != "" {
		if cfg.SrcMAC, err = net.ParseMAC(s); err != nil {
			return cfg, usageError{fmt.Sprintf("pktgen: --src-mac %q: want a MAC address", s)}
		}
	}
	if cfg.DstPorts, err = pktgen.ParsePortRange(c.String("dst-port")); err != nil {
		return cfg, usageError{"pktgen: --dst-port: " + err.Error()}
	}
	if cfg.SrcPorts, err = pktgen.ParsePortRange(c.String("src-port")); err != nil {
		return cfg, usageError{"pktgen: --src-port: " + err.Error()}
	}
	if cfg.Proto, err = pktgen.ParseProto(c.String("proto")); err != nil {
		return cfg, usageError{"pktgen: --proto: " + err.Error()}
	}
	cfg.Size = c.Int("size")
	if cfg.Size < 1 {
		return cfg, usageError{fmt.Sprintf("pktgen: --size %d: want a positive frame length", cfg.Size)}
	}
	cfg.UDPChecksum = c.Bool("udp-csum")
	cfg.Flows, cfg.FlowLen = c.Int("flows"), c.Int("flowlen")
	cfg.Threads, cfg.FirstThread = c.Int("threads"), c.Int("first-thread")
	if cfg.Threads < 1 {
		return cfg, usageError{fmt.Sprintf("pktgen: --threads %d: want at least 1", cfg.Threads)}
	}
	cfg.Count, cfg.Duration, cfg.Rate = c.Uint64("count"), c.Duration("duration"), c.Float64("rate")
	if d := c.Int64("delay"); d > 0 {
		cfg.Rate = 1e9 / float64(d)
	}
	cfg.Batch, cfg.Bind, cfg.Seed = c.Int("batch"), c.String("bind"), uint64(c.Int64("seed"))
	if cfg.Batch < 1 {
		return cfg, usageError{fmt.Sprintf("pktgen: --batch %d: want 1-1024", cfg.Batch)}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err.Error()}
	}
	return cfg, nil
}

// ifaceAddr returns ifi's first non-link-local address of the family, or
// the unspecified address when it has none (as pktgen does).
func ifaceAddr(ifi *net.Interface, v6 bool) (netip.Addr, error) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("interface %s: %w", ifi.Name, err)
	}
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if ip := p.Addr().Unmap(); ip.Is6() == v6 && !ip.IsLinkLocalUnicast() {
			return ip, nil
		}
	}
	if v6 {
		return netip.IPv6Unspecified(), nil
	}
	return netip.IPv4Unspecified(), nil
}
