package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/xlbnet/xlb/pkg/capture"
	"github.com/xlbnet/xlb/pkg/control"
)

// xlb capture: the daemon's capture stream (pkg/capture, GET /v1/capture)
// written as pcapng, pcap or a text listing.

func captureCommand() *cli.Command {
	return &cli.Command{
		Name:      "capture",
		Usage:     "capture the packets xlb handles (which tcpdump cannot see) to pcapng, pcap or a listing",
		ArgsUsage: " ",
		Description: "AF_XDP takes the VIPs' packets before the kernel's taps, so tcpdump never sees them. xlb capture\n" +
			"asks the daemon to copy them as received (--point rx) and/or as sent after encapsulation (--point tx),\n" +
			"filtered by rule, backend, verdict, drop reason and flow. Without -w it prints one line per packet;\n" +
			"-w FILE writes pcapng (or --format pcap), -w - writes it to stdout (xlb capture -w - | tshark -r -).\n" +
			"In pcapng each packet's interface names its point and outcome (rx:tx, rx:drop:no-rule, tx:tx), so\n" +
			"dropped packets carry their reason; --listing FILE writes the text listing beside the file.\n" +
			"The daemon copies at most --rate packets per second per queue, so a capture cannot starve a worker;\n" +
			"what it refuses is counted and reported at the end. It stops after --count packets, after\n" +
			"--duration, or on Ctrl-C.",
		Flags: append(socketFlags(),
			&cli.StringFlag{Name: "point", Value: "both", Usage: "where: rx (as received), tx (as sent) or both"},
			ruleFlag(false),
			&cli.StringFlag{Name: "backend", Aliases: []string{"b"}, Usage: "only packets to backend `ADDR`"},
			&cli.StringFlag{Name: "verdict", Usage: "only packets with these verdicts: tx, reply, drop, pass (comma-separated)"},
			&cli.StringFlag{Name: "reason", Usage: "only packets dropped or passed for `REASON` (a label of xlb_drop_packets_total)"},
			&cli.StringFlag{Name: "src", Usage: "only packets from `ADDR`, ADDR:PORT or PREFIX"},
			&cli.StringFlag{Name: "dst", Usage: "only packets to `ADDR`, ADDR:PORT or PREFIX"},
			&cli.IntFlag{Name: "port", Usage: "only packets with source or destination `PORT`"},
			&cli.StringFlag{Name: "proto", Usage: "only packets of protocol `P` (TCP, UDP, ICMP, … or a number)"},
			&cli.IntFlag{Name: "count", Usage: "stop after `N` packets (0: no limit)"},
			&cli.DurationFlag{Name: "duration", Usage: "stop after `D` (e.g. 10s; 0: no limit)"},
			&cli.IntFlag{Name: "snaplen", Aliases: []string{"s"}, Value: capture.DefaultSnaplen, Usage: "keep the first `N` bytes of each frame"},
			&cli.IntFlag{Name: "rate", Value: capture.DefaultRate, Usage: "copy at most `N` packets per second per queue"},
			&cli.StringFlag{Name: "write", Aliases: []string{"w"}, Usage: "write the capture to `FILE` (- for stdout)"},
			&cli.StringFlag{Name: "format", Value: capture.FormatPcapNG, Usage: "format of -w: pcapng or pcap"},
			&cli.StringFlag{Name: "listing", Usage: "also write the text listing to `FILE`"},
		),
		Action: runCapture,
	}
}

func runCapture(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if _, ok := capture.ParsePoint(c.String("point")); !ok {
		return usageError{fmt.Sprintf("--point %q: want rx, tx or both", c.String("point"))}
	}
	if c.Int("count") < 0 || c.Duration("duration") < 0 {
		return usageError{"--count and --duration must not be negative"}
	}
	q := control.CaptureQuery{
		Point: c.String("point"), Rule: c.String("rule"), Backend: c.String("backend"), Verdict: c.String("verdict"),
		Reason: c.String("reason"), Src: c.String("src"), Dst: c.String("dst"), Port: c.Int("port"), Proto: c.String("proto"),
		Count: c.Int("count"), Snaplen: c.Int("snaplen"), Rate: c.Int("rate"),
	}
	if d := c.Duration("duration"); d > 0 {
		q.Duration = d.String()
	}
	if err := q.Check(); err != nil {
		return usageError{err.Error()}
	}
	format := c.String("format")
	if format != capture.FormatPcapNG && format != capture.FormatPcap {
		return usageError{fmt.Sprintf("--format %q: want pcapng or pcap", format)}
	}

	var writers []capture.Writer
	var closers []io.Closer
	defer func() {
		for _, cl := range closers {
			cl.Close()
		}
	}()
	open := func(path, format string) error {
		out := c.App.Writer
		if path != "-" {
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			closers = append(closers, f)
			out = f
		}
		w, err := capture.NewWriter(format, out, q.Snaplen)
		if err != nil {
			return err
		}
		writers = append(writers, w)
		return nil
	}
	switch path := c.String("write"); path {
	case "":
		if err := open("-", capture.FormatListing); err != nil {
			return err
		}
	default:
		if err := open(path, format); err != nil {
			return err
		}
	}
	if path := c.String("listing"); path != "" {
		if err := open(path, capture.FormatListing); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	path, err := socketPath(c)
	if err != nil {
		return err
	}
	cl := control.NewClient(path)
	defer cl.Close()
	flushed := time.Now()
	done, err := cl.Capture(ctx, q, func(p *capture.Packet) error {
		for _, w := range writers {
			if err := w.Write(p); err != nil {
				return fmt.Errorf("write capture: %w", err)
			}
		}
		// A reader at the other end of a pipe (tshark -r -) sees the
		// packets as they come, a few times a second.
		if time.Since(flushed) > 200*time.Millisecond {
			flushed = time.Now()
			for _, w := range writers {
				if err := w.Flush(); err != nil {
					return fmt.Errorf("write capture: %w", err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	dropped := done.Limited + done.Lost
	for _, w := range writers {
		if err := w.Close(dropped); err != nil {
			return fmt.Errorf("write capture: %w", err)
		}
	}
	for _, cl := range closers {
		if err := cl.Close(); err != nil {
			return fmt.Errorf("write capture: %w", err)
		}
	}
	closers = nil
	printCaptureDone(c.App.ErrWriter, done)
	return nil
}

// printCaptureDone prints how a capture ended (render.go's kind of line,
// kept here beside its only caller).
func printCaptureDone(w io.Writer, d *control.CaptureDone) {
	fmt.Fprintf(w, "xlb capture: %d packets (ended by %s); %d refused by the rate limit, %d lost to a full ring\n", d.Packets, d.Ended, d.Limited, d.Lost)
}
