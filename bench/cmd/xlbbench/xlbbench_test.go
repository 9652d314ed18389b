package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xlbnet/xlb/ring"
)

// TestReflectQueue: every received frame leaves with our source MAC and
// the sinks' MACs in turn, nothing else changes, frames cycle, and a batch
// allocates nothing.
func TestReflectQueue(t *testing.T) {
	fake, err := ring.NewFake(ring.Options{NumFrames: 256, RingSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	own := [6]byte{2, 0, 0, 0, 0, 0xaa}
	macs := [][6]byte{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}}
	q := newReflectQueue(fake.Rings(), own, macs)
	q.step() // fill the fill ring
	in := make([]byte, 60)
	for i := range in {
		in[i] = byte(i)
	}
	for round := range 20 {
		for range 10 {
			if !fake.Deliver(in) {
				t.Fatal("deliver failed")
			}
		}
		if n := q.step(); n != 10 {
			t.Fatalf("round %d: step took %d of 10", round, n)
		}
		i := 0
		fake.Transmit(64, func(p []byte) {
			want := macs[(round*10+i)%2]
			if !bytes.Equal(p[0:6], want[:]) || !bytes.Equal(p[6:12], own[:]) || !bytes.Equal(p[12:], in[12:]) || len(p) != len(in) {
				t.Fatalf("round %d packet %d: %x", round, i, p)
			}
			i++
		})
		if i != 10 {
			t.Fatalf("round %d: transmitted %d of 10", round, i)
		}
	}
	if a := testing.AllocsPerRun(50, func() { fake.Deliver(in); q.step(); fake.Transmit(64, nil) }); a != 0 {
		t.Fatalf("%v allocations per batch", a)
	}
}

func TestMediansAndSummary(t *testing.T) {
	raw := []Point{
		{Scenario: "xlb", Queues: 1, TargetPPS: 0, Round: 1, ForwardedPPS: 300, CPUNsPerPkt: 10, ProcNsPerPkt: 1},
		{Scenario: "xlb", Queues: 1, TargetPPS: 0, Round: 2, ForwardedPPS: 100, CPUNsPerPkt: 30, ProcNsPerPkt: 3},
		{Scenario: "xlb", Queues: 1, TargetPPS: 0, Round: 3, ForwardedPPS: 200, CPUNsPerPkt: 20, ProcNsPerPkt: 2},
		{Scenario: "xlb", Queues: 1, TargetPPS: 1000, Round: 1, ForwardedPPS: 1000},
		{Scenario: "reflector", Queues: 1, TargetPPS: 0, Round: 1, ForwardedPPS: 400, CPUNsPerPkt: 5, ProcNsPerPkt: 1.6},
		{Scenario: "nft", Queues: 1, TargetPPS: 0, Round: 1, ForwardedPPS: 100, CPUNsPerPkt: 40},
		{Scenario: "xlb", Queues: 2, TargetPPS: 0, Round: 1, ForwardedPPS: 150, CPUNsPerPkt: 1},
		{Scenario: "xlb", Queues: 2, TargetPPS: 0, Round: 2, ForwardedPPS: 50, CPUNsPerPkt: 1},
	}
	m := medians(raw)
	if len(m) != 5 || m[0].Round != 3 || m[0].ForwardedPPS != 200 || m[1].TargetPPS != 1000 || m[4].ForwardedPPS != 50 {
		t.Fatalf("medians: %+v", m)
	}
	s := summarize(m, []int{1, 2})
	want := Summary{XLBMpps: 0.0002, ReflectorMpps: 0.0004, NftMpps: 0.0001, XLBVsReflector: 0.5, XLBVsNft: 2,
		XLBCPUNsPerPkt: 20, NftCPUNsPerPkt: 40, ReflectorCPUNsPkt: 5, Queues: 1,
		XLBProcNsPerPkt: 2, ReflectorProcNsPerPkt: 2, XLBVsReflector1Q: 0.5}
	if s != want {
		t.Fatalf("summary %+v\nwant    %+v", s, want)
	}
	var b strings.Builder
	printTable(&b, m)
	if lines := strings.Count(b.String(), "\n"); lines != 6 || !strings.Contains(b.String(), " max ") {
		t.Errorf("table:\n%s", b.String())
	}

	// With an A/B base binary, its ratios at one queue.
	m = append(m, Point{Scenario: "xlb-base", Queues: 1, ForwardedPPS: 100, ProcNsPerPkt: 4})
	s = summarize(m, []int{1, 2})
	if s.BaseVsReflector1Q != 0.25 || s.XLBVsBase1Q != 2 || s.BaseProcNsPerPkt != 4 || s.XLBProcVsBaseProc1Q != 0.5 {
		t.Errorf("summary with a base: %+v", s)
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a parenthesis, as the kernel prints it.
	stat := "4242 (xlb (a) b) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 12345 1234567 890 18446744073709551615"
	d, err := parseProcStat(stat)
	if err != nil || d != 3250*time.Millisecond {
		t.Fatalf("parseProcStat = %v, %v; want 3.25s", d, err)
	}
	if _, err := parseProcStat("4242 (xlb) S 1 2"); err == nil {
		t.Error("a short stat line parsed")
	}
	// Our own process has used some CPU by now.
	if d, err := procCPU(os.Getpid()); err != nil || d < 0 {
		t.Errorf("procCPU(self) = %v, %v", d, err)
	}
}

func TestParsePerfReport(t *testing.T) {
	out := `# To display the perf.data header info, please use --header/--header-only options.
#
# Samples: 8K of event 'cpu-clock:pppH'
# Overhead  Shared Object      Symbol
# ........  .................  ..........................................
#
    23.50%  xlb                [.] github.com/xlbnet/xlb/conntrack.(*Table).Lookup
    10.00%  [kernel.kallsyms]  [k] __pi_memcpy
     5.25%  xlb                [.] github.com/xlbnet/xlb/pkg/packet.Parse


#
# (Tip: ...)
#
`
	top := parsePerfReport(out, 2, 2000)
	want := []ProfileEntry{
		{Percent: 23.5, NsPerPkt: 470, DSO: "xlb", Symbol: "github.com/xlbnet/xlb/conntrack.(*Table).Lookup"},
		{Percent: 10, NsPerPkt: 200, DSO: "[kernel.kallsyms]", Symbol: "__pi_memcpy"},
	}
	if !slices.Equal(top, want) {
		t.Fatalf("top = %+v\nwant  %+v", top, want)
	}
}

func TestCPUStat(t *testing.T) {
	busy, total := cpuStat()
	if total == 0 || busy > total {
		t.Fatalf("busy %d total %d", busy, total)
	}
	if bg := backgroundCPU(50e6); bg < 0 || bg > float64(numCPU())+0.5 || math.IsNaN(bg) {
		t.Fatalf("background %v CPUs", bg)
	}
}

// TestSinkProgram runs the sink's XDP program on frames (BPF_PROG_TEST_RUN):
// IPv4 TCP and UDP to the VIP's port are counted and dropped, the rest
// passes uncounted.
func TestSinkProgram(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to load a BPF program")
	}
	sk, err := newSink()
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close()
	frame := func(etype uint16, vihl, proto uint8, dport uint16, size int) []byte {
		f := make([]byte, size)
		binary.BigEndian.PutUint16(f[12:], etype)
		f[14], f[23] = vihl, proto
		binary.BigEndian.PutUint16(f[36:], dport)
		return f
	}
	for _, tc := range []struct {
		name    string
		f       []byte
		counted bool
	}{
		{"tcp to port", frame(0x0800, 0x45, 6, vipPort, 60), true},
		{"udp to port", frame(0x0800, 0x45, 17, vipPort, 60), true},
		{"tcp other port", frame(0x0800, 0x45, 6, 8080, 60), false},
		{"icmp", frame(0x0800, 0x45, 1, vipPort, 60), false},
		{"ip options", frame(0x0800, 0x46, 6, vipPort, 60), false},
		{"arp", frame(0x0806, 0x45, 6, vipPort, 60), false},
		{"ipv6", frame(0x86dd, 0x45, 6, vipPort, 60), false},
		{"too short", frame(0x0800, 0x45, 6, vipPort, 60)[:37], false},
	} {
		before, err := sk.packets()
		if err != nil {
			t.Fatal(err)
		}
		ret, err := sk.prog.Run(&ebpf.RunOptions{Data: tc.f})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		after, _ := sk.packets()
		wantRet, wantN := uint32(2), uint64(0) // XDP_PASS
		if tc.counted {
			wantRet, wantN = 1, 1 // XDP_DROP
		}
		if ret != wantRet || after-before != wantN {
			t.Errorf("%s: verdict %d counted %d; want %d, %d", tc.name, ret, after-before, wantRet, wantN)
		}
	}
}

// TestStopAfterHandOver: a forwarder whose process handed over to another
// (`xlb restart`: the successor inherits the log's pipe) is stopped by
// signalling the one it handed to; signalling the first, gone already,
// left the harness waiting for the pipe forever.
func TestStopAfterHandOver(t *testing.T) {
	cmd := exec.Command("sh", "-c", `sleep 60 & echo "ready $!"`)
	f, err := startAndWaitFor(cmd, "ready", nil, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(f.ready, "ready "))
	if err != nil {
		t.Fatalf("ready line %q: %v", f.ready, err)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	f.handOver(pid)
	stopped := make(chan struct{})
	go func() {
		f.Stop("sh")
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return within 10 s")
	}
	// Stop returns once the process is gone: the harness removes the
	// namespaces next, under a successor that must have let go of them.
	if !gone(pid) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		t.Errorf("the process handed to (pid %d) still runs: %s", pid, b)
	}
}

func TestGone(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if gone(pid) {
		t.Fatalf("a running sleep (pid %d) counted as gone", pid)
	}
	cmd.Process.Kill()
	if !awaitGone(pid, 5*time.Second) {
		t.Fatalf("a killed sleep (pid %d) not a zombie within 5 s", pid)
	}
	cmd.Wait()
	if !gone(pid) {
		t.Fatalf("a reaped sleep (pid %d) not gone", pid)
	}
}
