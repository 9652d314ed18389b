package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"strings"
	"testing"

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
		{Scenario: "xlb", Queues: 1, TargetPPS: 0, Round: 1, ForwardedPPS: 300, CPUNsPerPkt: 10},
		{Scenario: "xlb", Queues: 1, TargetPPS: 0, Round: 2, ForwardedPPS: 100, CPUNsPerPkt: 30},
		{Scenario: "xlb", Queues: 1, TargetPPS: 0, Round: 3, ForwardedPPS: 200, CPUNsPerPkt: 20},
		{Scenario: "xlb", Queues: 1, TargetPPS: 1000, Round: 1, ForwardedPPS: 1000},
		{Scenario: "reflector", Queues: 1, TargetPPS: 0, Round: 1, ForwardedPPS: 400, CPUNsPerPkt: 5},
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
		XLBCPUNsPerPkt: 20, NftCPUNsPerPkt: 40, ReflectorCPUNsPkt: 5, Queues: 1}
	if s != want {
		t.Fatalf("summary %+v\nwant    %+v", s, want)
	}
	var b strings.Builder
	printTable(&b, m)
	if lines := strings.Count(b.String(), "\n"); lines != 6 || !strings.Contains(b.String(), " max ") {
		t.Errorf("table:\n%s", b.String())
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
