package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/control"
)

// xlb top: a live view of the status, redrawn every interval on the
// terminal's alternate screen; keys sort, q quits. It only reads (GET
// /v1/status), so it works over the read-only control level.

func topCommand() *cli.Command {
	return &cli.Command{
		Name:      "top",
		Usage:     "a live view: per rule and backend packets/s, bytes/s, new connections/s, connections, health; drops; queues",
		ArgsUsage: " ",
		Description: "Redraws every --interval (default 1s) from the daemon's status: the appliance's rx, tx and drop\n" +
			"rates, each queue's load, the drops by reason, and per rule and backend packets/s, bytes/s, new\n" +
			"connections/s, active and inactive connections, health or tier, and weight in the Maglev table.\n" +
			"Rates are the daemon's (its estimator's window, 2s). Keys: q quits; p, b, c, a, n sort by\n" +
			"packets/s, bytes/s, new connections/s, active connections or name; r reverses the order.\n" +
			"It only reads, so a member of control_socket_group may run it. --once prints one frame\n" +
			"and exits (no terminal needed); --json prints the status the view is made of.",
		Flags: append(socketFlags(),
			&cli.DurationFlag{Name: "interval", Value: time.Second, Usage: "redraw every `D`"},
			&cli.StringFlag{Name: "sort", Value: "pkts", Usage: "sort by pkts, bytes, conns, active or name"},
			&cli.BoolFlag{Name: "once", Usage: "print one frame and exit"},
			jsonFlag()),
		Action: runTop,
	}
}

func runTop(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	v := topView{Sort: c.String("sort"), Interval: c.Duration("interval")}
	known := false
	for _, k := range topSortKeys {
		known = known || k.name == v.Sort
	}
	if !known {
		return usageError{fmt.Sprintf("--sort %q: want pkts, bytes, conns, active or name", v.Sort)}
	}
	if v.Interval < 100*time.Millisecond {
		return usageError{fmt.Sprintf("--interval %s: want at least 100ms", v.Interval)}
	}
	if c.Bool("json") || c.Bool("once") {
		return withStatus(c, func(st *control.Status) { printTop(c.App.Writer, st, v, time.Now(), 0, 0) })
	}
	path, err := socketPath(c)
	if err != nil {
		return err
	}
	cl := control.NewClient(path)
	defer cl.Close()
	term, err := openTerminal()
	if err != nil {
		return err
	}
	defer term.restore()
	return topLoop(c.Context, cl, term, v)
}

// topLoop redraws until q, SIGINT or SIGTERM.
func topLoop(ctx context.Context, cl *control.Client, term *terminal, v topView) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	keys := term.keys()
	tick := time.NewTicker(v.Interval)
	defer tick.Stop()
	var st *control.Status
	fetch := func() {
		fctx, cancel := context.WithTimeout(ctx, 2*v.Interval+time.Second)
		defer cancel()
		got, err := cl.Status(fctx, control.StatusQuery{})
		v.Err = ""
		if err != nil {
			v.Err = err.Error()
			return
		}
		st = got
	}
	draw := func() {
		w, h := term.size()
		var b bytes.Buffer
		b.WriteString("\x1b[H\x1b[2J") // home, clear
		if st != nil {
			printTop(&b, st, v, time.Now(), w, h)
		} else {
			fmt.Fprintf(&b, "xlb top: waiting for the daemon: %s\r\n", v.Err)
		}
		term.out.Write(bytes.ReplaceAll(b.Bytes(), []byte("\n"), []byte("\r\n")))
	}
	fetch()
	draw()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-winch:
			draw()
		case <-tick.C:
			fetch()
			draw()
		case k, ok := <-keys:
			if !ok || k == 'q' || k == 'Q' {
				return nil
			}
			switch k {
			case 'r':
				v.Reverse = !v.Reverse
			default:
				for _, s := range topSortKeys {
					if s.key == k {
						v.Sort, v.Reverse = s.name, false
					}
				}
			}
			draw()
		}
	}
}

// terminal is the controlling terminal in the mode xlb top needs: keys
// without Enter and without echo (signals still work), the alternate
// screen, the cursor hidden; restore puts everything back.
type terminal struct {
	in, out *os.File
	saved   unix.Termios
}

func openTerminal() (*terminal, error) {
	t := &terminal{in: os.Stdin, out: os.Stdout}
	saved, err := unix.IoctlGetTermios(int(t.in.Fd()), unix.TCGETS)
	if err != nil {
		return nil, usageError{"xlb top needs a terminal (use --once or --json, or xlb status)"}
	}
	t.saved = *saved
	raw := *saved
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(int(t.in.Fd()), unix.TCSETS, &raw); err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	t.out.WriteString("\x1b[?1049h\x1b[?25l") // alternate screen, hide the cursor
	return t, nil
}

func (t *terminal) restore() {
	t.out.WriteString("\x1b[?25h\x1b[?1049l")
	unix.IoctlSetTermios(int(t.in.Fd()), unix.TCSETS, &t.saved)
}

// size is the terminal's width and height (0, 0 when unknown).
func (t *terminal) size() (int, int) {
	ws, err := unix.IoctlGetWinsize(int(t.out.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0
	}
	return int(ws.Col), int(ws.Row)
}

// keys delivers the bytes typed; it closes the channel at end of input.
func (t *terminal) keys() <-chan byte {
	ch := make(chan byte, 16)
	go func() {
		defer close(ch)
		buf := make([]byte, 16)
		for {
			n, err := t.in.Read(buf)
			for _, b := range buf[:n] {
				ch <- b
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}
