package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/xlbnet/xlb/pkg/pktgen"
)

func numCPU() int {
	n := 0
	b, _ := os.ReadFile("/proc/stat")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "cpu") && !strings.HasPrefix(l, "cpu ") {
			n++
		}
	}
	return n
}

// cpuStat returns the machine's busy and total time in jiffies (USER_HZ).
func cpuStat() (busy, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, s := range f[1:] {
		v, _ := strconv.ParseUint(s, 10, 64)
		if i >= 8 { // guest time is already in user
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

const jiffy = 10 * time.Millisecond // USER_HZ = 100 on Linux

// backgroundCPU is how many CPUs are busy with no traffic (other jobs).
func backgroundCPU(d time.Duration) float64 {
	b0, t0 := cpuStat()
	time.Sleep(d)
	b1, t1 := cpuStat()
	if t1 == t0 {
		return 0
	}
	return float64(b1-b0) / float64(t1-t0) * float64(numCPU())
}

// startWarm starts sc's forwarder and warms it up (flows established,
// neighbours and bridge learned), checking that it forwards at all. The
// caller stops the forwarder.
func startWarm(ctx context.Context, t *topo, sk *sink, sc scenario) (*forwarder, pktgen.Packet, error) {
	fw, err := sc.start(t)
	if err != nil {
		return nil, pktgen.Packet{}, err
	}
	mix := established
	if sc.mix == "syn" {
		mix = newFlows
	}
	var warm Point
	for try := 0; try < 10; try++ {
		warm, err = measure(ctx, t, sk, mix, 20000, 500*time.Millisecond, 0, 0)
		if err != nil {
			fw.Stop(sc.name)
			return nil, mix, err
		}
		if warm.Forwarded > 0 {
			break
		}
	}
	if warm.Forwarded == 0 {
		fw.Stop(sc.name)
		return nil, mix, errors.New("nothing reached the sinks during warm-up")
	}
	return fw, mix, nil
}

func runScenario(ctx context.Context, t *topo, sk *sink, sc scenario, o options, bg float64, round int) ([]Point, error) {
	fw, mix, err := startWarm(ctx, t, sk, sc)
	if err != nil {
		return nil, err
	}
	defer fw.Stop(sc.name)
	var pts []Point
	for _, load := range o.loads {
		p, err := measure(ctx, t, sk, mix, load, o.duration, bg, fw.pid)
		if err != nil {
			return nil, err
		}
		p.Scenario, p.Mix, p.Queues, p.Round = sc.name, sc.mix, t.queues, round
		printProgress(p)
		pts = append(pts, p)
	}
	return pts, nil
}

func printProgress(p Point) {
	fmt.Fprintf(os.Stderr, "%-13s %d %6d %12.0f %12.0f %14.0f %6.1f%% %9.2f %12.0f %12.0f\n", p.Scenario, p.Round, p.Queues, p.TargetPPS, p.OfferedPPS, p.ForwardedPPS, 100*p.Loss, p.CPUBusy, p.CPUNsPerPkt, p.ProcNsPerPkt)
}

// procCPU returns the CPU time process pid has used (utime + stime of
// all its threads, /proc/PID/stat fields 14 and 15, in USER_HZ ticks).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStat(string(b))
}

// procStatFields returns the fields of the text of /proc/PID/stat from
// field 3 (the state) on. The command name (field 2) is in parentheses
// and may hold spaces and parentheses, so they are counted from the last
// ')'.
func procStatFields(s string) ([]string, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("proc stat: no command name in %q", s)
	}
	return strings.Fields(s[i+1:]), nil
}

// parseProcStat reads utime + stime from the text of /proc/PID/stat.
func parseProcStat(s string) (time.Duration, error) {
	f, err := procStatFields(s) // f[0] is field 3 (state)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command name", len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("proc stat: utime %q stime %q", f[11], f[12])
	}
	return time.Duration(utime+stime) * jiffy, nil
}

// measure offers load (pps; 0 = as fast as possible) of mix for d and
// counts what reaches the sinks; with pid > 0 it also measures that
// process's CPU time.
func measure(ctx context.Context, t *topo, sk *sink, mix pktgen.Packet, load float64, d time.Duration, bg float64, pid int) (Point, error) {
	if err := ctx.Err(); err != nil {
		return Point{}, fmt.Errorf("interrupted: %w", err)
	}
	genMAC, err := linkMAC(t.ns("gen"), "eth0")
	if err != nil {
		return Point{}, err
	}
	p := mix
	p.SrcMAC, p.DstMAC = genMAC, t.appMAC
	p.Dst = pktgen.AddrRange{First: netip.MustParseAddr(vipAddr), Last: netip.MustParseAddr(vipAddr)}
	p.DstPorts = pktgen.PortRange{Min: vipPort, Max: vipPort}
	cfg := pktgen.Config{Packet: p, Netns: t.ns("gen"), Ifname: "eth0", Threads: 1, FirstThread: 1 % numCPU(),
		Duration: d, Rate: load, Batch: 64, Bind: "copy"}
	s0, err := sk.packets()
	if err != nil {
		return Point{}, err
	}
	var p0 time.Duration
	if pid > 0 {
		if p0, err = procCPU(pid); err != nil {
			return Point{}, err
		}
	}
	b0, t0 := cpuStat()
	rep, err := pktgen.Run(ctx, cfg)
	if err != nil {
		return Point{}, fmt.Errorf("generator: %w", err)
	}
	time.Sleep(100 * time.Millisecond) // let the forwarder drain
	b1, t1 := cpuStat()
	var p1 time.Duration
	if pid > 0 {
		if p1, err = procCPU(pid); err != nil {
			return Point{}, err
		}
	}
	s1, err := sk.packets()
	if err != nil {
		return Point{}, err
	}
	r := rep.Results[0]
	el := r.Elapsed.Seconds()
	pt := Point{TargetPPS: load, Sent: r.Packets, Forwarded: s1 - s0}
	if el > 0 {
		pt.OfferedPPS = float64(r.Packets) / el
		pt.ForwardedPPS = float64(pt.Forwarded) / el
	}
	if r.Packets > 0 {
		pt.Loss = max(0, 1-float64(pt.Forwarded)/float64(r.Packets))
	}
	window := float64(t1-t0) / float64(numCPU()) * jiffy.Seconds() // wall seconds measured
	busyNs := float64(b1-b0) * float64(jiffy.Nanoseconds())
	if window > 0 {
		pt.CPUBusy = float64(b1-b0) * jiffy.Seconds() / window
	}
	if pt.Forwarded > 0 {
		pt.CPUNsPerPkt = busyNs / float64(pt.Forwarded)
		pt.CPUNsPerPktBg = max(0, busyNs-bg*window*1e9) / float64(pt.Forwarded)
	}
	if pid > 0 {
		pt.ProcCPUSec = (p1 - p0).Seconds()
		if pt.Forwarded > 0 {
			pt.ProcNsPerPkt = float64((p1 - p0).Nanoseconds()) / float64(pt.Forwarded)
		}
	}
	return pt, nil
}
