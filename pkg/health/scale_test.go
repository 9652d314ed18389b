package health

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/benchutil"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// The scale benchmark runs two helper processes of this test binary inside
// a network namespace of its own (only lo, so a wildcard listener reaches
// nothing else): an acceptor, which accepts and closes every connection
// to scalePort on any 127.0.0.0/8 address, and a prober, which measures
// its own CPU time (getrusage: user + system, everything the process is
// charged, the kernel's loopback handshake work included) first for a
// reference and then for a Checker. TestMain dispatches on scaleRoleEnv.
const (
	scaleRoleEnv = "XLB_HEALTH_SCALE_ROLE"
	scaleArgsEnv = "XLB_HEALTH_SCALE_ARGS"
	scalePort    = 7000
	// scaleProfileEnv, set to a file name, makes the prober write a CPU
	// profile of its measurement window there.
	scaleProfileEnv = "XLB_HEALTH_SCALE_PROFILE"
)

func TestMain(m *testing.M) {
	switch os.Getenv(scaleRoleEnv) {
	case "acceptor":
		os.Exit(runAcceptor())
	case "prober":
		os.Exit(runScaleProber())
	}
	os.Exit(m.Run())
}

// scaleArgs configure the prober helper.
type scaleArgs struct {
	Backends  int           // distinct backend addresses, 127.1.0.0 upwards
	Interval  time.Duration // of every TCP check
	Warmup    time.Duration // before the measurement window
	Window    time.Duration // the measurement window
	Reference int           // connects of each reference loop
}

// scaleResult is what the prober helper prints, as one JSON line.
type scaleResult struct {
	Probes         int64         // probes started in the window
	Failed         int64         // backends whose last probe failed
	FirstError     string        // one of their errors
	CPU            time.Duration // the process's CPU time in the window
	RefRaw         time.Duration // CPU per connect: socket, blocking connect, close (raw syscalls)
	RefDial        time.Duration // CPU per connect: net.Dialer.DialContext and Close, one after another
	Voluntary      int64         // context switches in the window: waiting
	Preempted      int64         // and preempted
	PerTenth       []int64       // probes started in each 100 ms of the window
	Goroutines     int
	HeapInuse      uint64
	WindowDuration time.Duration
}

func backendAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 1, byte(i >> 8), byte(i)})
}

// runAcceptor accepts and closes connections until stdin closes.
func runAcceptor() int {
	ln, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", scalePort))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for range runtime.NumCPU() {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// contextSwitches is how often the process's threads gave up a CPU,
// waiting (voluntary) or preempted.
func contextSwitches() (voluntary, preempted int64) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Nvcsw, ru.Nivcsw
}

// runScaleProber measures the references and then the Checker, and prints
// a scaleResult.
func runScaleProber() int {
	var a scaleArgs
	if err := json.Unmarshal([]byte(os.Getenv(scaleArgsEnv)), &a); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var res scaleResult
	var err error
	if res.RefRaw, err = refRawConnect(a); err != nil {
		fmt.Fprintln(os.Stderr, "reference:", err)
		return 1
	}
	if res.RefDial, err = refDial(a); err != nil {
		fmt.Fprintln(os.Stderr, "reference:", err)
		return 1
	}

	c := New(Options{Seed: 1})
	targets := make([]Target, a.Backends)
	for i := range targets {
		targets[i] = Target{
			Key:   Key{Rule: "scale", Backend: backendAddr(i)},
			Check: Check{Kind: TCP, Port: scalePort, Interval: a.Interval, Timeout: 2 * time.Second, HealthyThreshold: 2, UnhealthyThreshold: 2},
		}
	}
	if err := c.Set(targets); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	time.Sleep(a.Warmup)
	if path := os.Getenv(scaleProfileEnv); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	fmt.Fprintf(os.Stderr, "scale prober: measuring for %s\n", a.Window)
	start, cpu, probes0 := time.Now(), benchutil.Process(), c.Probes()
	vol0, pre0 := contextSwitches()
	// The probes started in each tenth of a second: a herd shows as a
	// peak far above the mean.
	for tick := time.NewTicker(100 * time.Millisecond); time.Since(start) < a.Window; {
		before := c.Probes()
		<-tick.C
		res.PerTenth = append(res.PerTenth, int64(c.Probes()-before))
	}
	res.CPU, res.WindowDuration = cpu.Elapsed(), time.Since(start)
	vol1, pre1 := contextSwitches()
	res.Voluntary, res.Preempted = vol1-vol0, pre1-pre0
	res.Probes = int64(c.Probes() - probes0)
	res.Goroutines = runtime.NumGoroutine()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapInuse = ms.HeapInuse
	for _, st := range c.Status() {
		if st.LastError != nil {
			res.Failed++
			if res.FirstError == "" {
				res.FirstError = st.LastError.Error()
			}
		}
	}
	c.Stop()
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// refRawConnect is the kernel's floor: socket, a blocking connect and
// close, with raw system calls, over the benchmark's backend addresses.
func refRawConnect(a scaleArgs) (time.Duration, error) {
	cpu := benchutil.Process()
	for i := range a.Reference {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return 0, err
		}
		sa := &syscall.SockaddrInet4{Port: scalePort, Addr: backendAddr(i % a.Backends).As4()}
		err = syscall.Connect(fd, sa)
		syscall.Close(fd)
		if err != nil {
			return 0, fmt.Errorf("connect %s: %w", backendAddr(i%a.Backends), err)
		}
	}
	return cpu.Elapsed() / time.Duration(a.Reference), nil
}

// refDial is Go's own cost of a connection made and closed serially:
// net.Dialer (non-blocking connect, the poller) without the Checker.
func refDial(a scaleArgs) (time.Duration, error) {
	ctx := context.Background()
	cpu := benchutil.Process()
	for i := range a.Reference {
		c, err := DirectDial(ctx, "tcp", Key{}, netip.AddrPortFrom(backendAddr(i%a.Backends), scalePort))
		if err != nil {
			return 0, err
		}
		c.Close()
	}
	return cpu.Elapsed() / time.Duration(a.Reference), nil
}

// runScale runs the acceptor and the prober in a fresh namespace and
// returns the prober's result.
func runScale(tb testing.TB, a scaleArgs) scaleResult {
	tb.Helper()
	ns := testutil.NewNetNS(tb, "hcs")
	if err := ns.Run("ip", "link", "set", "lo", "up"); err != nil {
		tb.Fatal(err)
	}
	cmd, err := benchutil.Self(ns.Command)
	if err != nil {
		tb.Fatal(err)
	}
	acc := benchutil.StartChild(tb, cmd, scaleRoleEnv+"=acceptor")
	defer acc.Stop()
	if line, err := acc.Out.ReadString('\n'); err != nil || line != "ready\n" {
		tb.Fatalf("acceptor: %q %v", line, err)
	}
	args, _ := json.Marshal(a)
	pr, err := benchutil.Self(ns.Command)
	if err != nil {
		tb.Fatal(err)
	}
	pr.Env = append(os.Environ(), scaleRoleEnv+"=prober", scaleArgsEnv+"="+string(args))
	pr.Stderr = os.Stderr
	b, err := pr.Output()
	if err != nil {
		tb.Fatalf("prober: %v", err)
	}
	var res scaleResult
	if err := json.Unmarshal(b, &res); err != nil {
		tb.Fatalf("prober's result %q: %v", b, err)
	}
	return res
}

// BenchmarkCheckerScale: 10 000 distinct backends (127.1.0.0 upwards in a
// namespace of their own) with TCP checks every 5 s, i.e. 2000 probes/s:
// the prober process's CPU time per probe and as a share of one CPU at
// that rate, beside two references measured in the same run (raw
// socket/connect/close, and net.Dialer serially). The goal: ≤ 10 % of one
// CPU. bench/README.md keeps the figures.
func BenchmarkCheckerScale(b *testing.B) {
	testutil.RequireRoot(b)
	const backends, interval = 10000, 5 * time.Second
	for b.Loop() {
		res := runScale(b, scaleArgs{Backends: backends, Interval: interval, Warmup: 2 * time.Second, Window: 2 * interval, Reference: 20000})
		if res.Probes == 0 {
			b.Fatal("no probe in the window")
		}
		perProbe := res.CPU / time.Duration(res.Probes)
		rate := float64(res.Probes) / res.WindowDuration.Seconds()
		b.ReportMetric(float64(perProbe.Nanoseconds())/1e3, "cpu-µs/probe")
		b.ReportMetric(100*float64(perProbe)*float64(backends)/float64(interval), "%cpu@2000/s")
		b.ReportMetric(rate, "probes/s")
		b.ReportMetric(float64(res.RefRaw.Nanoseconds())/1e3, "ref-raw-µs/connect")
		b.ReportMetric(float64(res.RefDial.Nanoseconds())/1e3, "ref-dial-µs/connect")
		b.ReportMetric(float64(perProbe)/float64(res.RefRaw), "x-raw")
		b.ReportMetric(float64(res.Failed), "failed-backends")
		if res.Failed > 0 {
			b.Logf("%d backends failing, for instance: %s", res.Failed, res.FirstError)
		}
		b.ReportMetric(float64(res.HeapInuse)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(res.Goroutines), "goroutines")
		b.ReportMetric(float64(res.Voluntary)/res.WindowDuration.Seconds(), "wakeups/s")
		peak := slices.Max(res.PerTenth)
		b.ReportMetric(float64(peak)/(rate/10), "peak/mean-100ms")
		b.Logf("%d probes in %s (%s), %d failed; CPU %s = %s per probe; references %s (raw), %s (net.Dialer); %d goroutines, heap %d MiB; context switches %d waiting, %d preempted",
			res.Probes, res.WindowDuration.Round(time.Millisecond), strconv.FormatFloat(rate, 'f', 0, 64)+"/s", res.Failed, res.CPU, perProbe, res.RefRaw, res.RefDial, res.Goroutines, res.HeapInuse>>20, res.Voluntary, res.Preempted)
	}
}
