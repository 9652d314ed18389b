package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// profileTop is how many entries of a profile go into the results.
const profileTop = 15

// Profile is a CPU profile of one forwarder process during one extra
// max-load point (not one of the rounds, so the profiler's own cost does
// not bias them).
type Profile struct {
	Scenario string         `json:"scenario"`
	Queues   int            `json:"queues"`
	Point    Point          `json:"point"`
	File     string         `json:"file"` // perf.data, beside the JSON (not committed)
	Top      []ProfileEntry `json:"top"`
}

// ProfileEntry is one symbol of a profile: its share of the process's
// samples (user and kernel) and that share of the process's CPU time per
// forwarded packet.
type ProfileEntry struct {
	Percent  float64 `json:"percent"`
	NsPerPkt float64 `json:"ns_per_pkt"`
	DSO      string  `json:"dso"`
	Symbol   string  `json:"symbol"`
}

// profileScenario starts sc's forwarder, warms it up, and records it with
// `perf record -g -p PID` while the generator offers its maximum load.
func profileScenario(ctx context.Context, t *topo, sk *sink, sc scenario, o options, bg float64, date string) (Profile, error) {
	if _, err := exec.LookPath("perf"); err != nil {
		return Profile{}, fmt.Errorf("--profile needs perf(1) (apt-get install linux-perf): %w", err)
	}
	fw, mix, err := startWarm(ctx, t, sk, sc)
	if err != nil {
		return Profile{}, err
	}
	defer fw.Stop(sc.name)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return Profile{}, err
	}
	file := filepath.Join(o.out, fmt.Sprintf("%s-%s-%dq.perf.data", strings.ReplaceAll(date, ":", ""), sc.name, t.queues))
	rec := exec.Command("perf", "record", "-q", "-g", "-p", strconv.Itoa(fw.pid), "-o", file)
	var recErr strings.Builder
	rec.Stderr = &recErr
	if err := rec.Start(); err != nil {
		return Profile{}, fmt.Errorf("perf record: %w", err)
	}
	time.Sleep(300 * time.Millisecond) // let perf attach to every thread
	pt, err := measure(ctx, t, sk, mix, 0, o.duration, bg, fw.pid)
	_ = rec.Process.Signal(syscall.SIGINT)
	// perf record writes its file on SIGINT and then ends by that signal.
	if werr := rec.Wait(); werr != nil && !endedBy(werr, syscall.SIGINT) && err == nil {
		err = fmt.Errorf("perf record: %w: %s", werr, strings.TrimSpace(recErr.String()))
	}
	if err != nil {
		return Profile{}, err
	}
	pt.Scenario, pt.Mix, pt.Queues = sc.name+"-profiled", sc.mix, t.queues
	printProgress(pt)
	out, err := exec.Command("perf", "report", "-i", file, "--stdio", "--no-children", "-g", "none", "--sort", "dso,sym").Output()
	if err != nil {
		return Profile{}, fmt.Errorf("perf report: %w", err)
	}
	return Profile{Scenario: sc.name, Queues: t.queues, Point: pt, File: file, Top: parsePerfReport(string(out), profileTop, pt.ProcNsPerPkt)}, nil
}

// parsePerfReport reads the first n entries of `perf report --stdio
// --no-children -g none --sort dso,sym`, lines such as
//
//	23.45%  xlb  [.] github.com/xlbnet/xlb/conntrack.(*Table).Lookup
//
// and gives each its share of nsPerPkt.
func parsePerfReport(out string, n int, nsPerPkt float64) []ProfileEntry {
	var top []ProfileEntry
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasSuffix(f[0], "%") || strings.HasPrefix(f[0], "#") {
			continue
		}
		pct, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
		if err != nil {
			continue
		}
		top = append(top, ProfileEntry{Percent: pct, NsPerPkt: round(pct/100*nsPerPkt, 0), DSO: f[1], Symbol: strings.Join(f[3:], " ")})
		if len(top) == n {
			break
		}
	}
	return top
}

// endedBy reports whether err says a command ended by signal sig.
func endedBy(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

func printProfile(w io.Writer, p Profile) {
	fmt.Fprintf(w, "\nprofile of %s, %d queue(s), max load: %.0f pps forwarded, %.0f process ns/pkt (%s)\n", p.Scenario, p.Queues, p.Point.ForwardedPPS, p.Point.ProcNsPerPkt, p.File)
	for _, e := range p.Top {
		fmt.Fprintf(w, "%6.2f%% %7.0f ns/pkt  %-12s %s\n", e.Percent, e.NsPerPkt, e.DSO, e.Symbol)
	}
}
