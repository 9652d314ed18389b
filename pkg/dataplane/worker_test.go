package dataplane

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/packettest"
	"github.com/xlbnet/xlb/pkg/spsc"
	"github.com/xlbnet/xlb/ring"
)

var (
	ourMAC    = [6]byte{0x02, 0xaa, 0, 0, 0, 1}
	routerMAC = [6]byte{0x02, 0xbb, 0, 0, 0, 1}
	ourAddr   = netip.MustParseAddr("198.18.0.2")
)

// fakeWorker is a worker over a ring.Fake with a world's snapshot whose
// backends get templates of kind.
type fakeWorker struct {
	t     *testing.T
	w     *world
	fake  *ring.Fake
	wk    *Worker
	snap  atomic.Pointer[Snapshot]
	out   [][]byte
	clock *conntrack.FakeClock
}

func newFakeWorker(t *testing.T, spec ruleSpec, kind encap.Kind, mtu int) *fakeWorker {
	t.Helper()
	w := newWorld(t, spec)
	for i := range w.rule.Backends {
		b := &w.rule.Backends[i]
		tmpl, err := encap.NewTemplate(encap.Spec{Kind: kind, SrcMAC: ourMAC, DstMAC: routerMAC, Src: ourAddr, Dst: netip.AddrFrom16(b.Addr).Unmap(), MTU: mtu})
		if err != nil {
			t.Fatal(err)
		}
		b.Template = tmpl
	}
	w.publish()
	fake, err := ring.NewFake(ring.Options{NumFrames: 1024, RingSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	fw := &fakeWorker{t: t, w: w, fake: fake}
	fw.snap.Store(w.snap)
	fw.clock = &conntrack.FakeClock{}
	fw.wk = NewWorker(fake.Rings(), &fw.snap, *w.q, fw.clock, nil)
	fw.wk.Step() // fill the fill ring
	return fw
}

// run delivers frames, runs one step and collects what was transmitted.
func (fw *fakeWorker) run(frames ...[]byte) [][]byte {
	fw.t.Helper()
	for _, f := range frames {
		if !fw.fake.Deliver(f) {
			fw.t.Fatal("deliver failed")
		}
	}
	if got := fw.wk.Step(); got != len(frames) {
		fw.t.Fatalf("Step processed %d of %d frames", got, len(frames))
	}
	var out [][]byte
	fw.fake.Transmit(1<<10, func(p []byte) { out = append(out, append([]byte(nil), p...)) })
	return out
}

func tcpFrame(src string, sport uint16, syn bool) []byte {
	return packettest.Frame(packettest.Spec{Src: netip.MustParseAddr(src), Dst: netip.AddrFrom16(testVIP).Unmap(), Proto: layers.IPProtocolTCP,
		SrcPort: sport, DstPort: 80, SYN: syn, ACK: !syn, DF: true, Payload: []byte("hello")})
}

func TestWorkerForwardsIPIP(t *testing.T) {
	fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(3)}, encap.IPIP, 1500)
	in := tcpFrame("198.51.100.20", 40000, true)
	out := fw.run(in)
	if len(out) != 1 {
		t.Fatalf("transmitted %d frames", len(out))
	}
	m, res := packet.Parse(out[0])
	if res != packet.OK || m.Proto != packet.ProtoIPIP {
		t.Fatalf("output: %v proto %d", res, m.Proto)
	}
	backend := fw.w.maglev(tcp("198.51.100.20", 40000, syn))
	if got := netip.AddrFrom16(m.Dst).Unmap().String(); got != backend {
		t.Errorf("outer destination %s, want backend %s", got, backend)
	}
	if got := netip.AddrFrom16(m.Src).Unmap(); got != ourAddr {
		t.Errorf("outer source %s", got)
	}
	if [6]byte(out[0][0:6]) != routerMAC || [6]byte(out[0][6:12]) != ourMAC {
		t.Errorf("MACs %x → %x", out[0][6:12], out[0][0:6])
	}
	im, _ := packet.Parse(in)
	inner, want := string(out[0][m.L4Off:]), string(in[im.L3Off:im.L3End]) // L2 padding is not carried
	if inner != want {
		t.Errorf("inner packet changed:\n got %x\nwant %x", inner, want)
	}
	if got := fw.wk.Backends.Packets(0, fw.w.slotOf(backend)); got != 1 {
		t.Errorf("per-backend count of %s = %d, want 1", backend, got)
	}
	c := &fw.wk.Counters
	if c.RXPackets.Load() != 1 || c.TXPackets.Load() != 1 || c.Verdicts[Tx].Load() != 1 {
		t.Errorf("counters rx %d tx %d verdict-tx %d", c.RXPackets.Load(), c.TXPackets.Load(), c.Verdicts[Tx].Load())
	}
}

func TestWorkerDropsAndRecyclesFrames(t *testing.T) {
	fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(3)}, encap.IPIP, 1500)
	free := fw.fake.Rings().Frames.Len()
	bad := tcpFrame("198.51.100.21", 1, true)
	bad[14+10] ^= 0xff // IPv4 header checksum
	notOurs := packettest.Frame(packettest.Spec{Src: netip.MustParseAddr("198.51.100.21"), Dst: netip.MustParseAddr("203.0.113.99"), Proto: layers.IPProtocolUDP, SrcPort: 1, DstPort: 2})
	out := fw.run(bad, notOurs)
	if len(out) != 0 {
		t.Fatalf("transmitted %d frames", len(out))
	}
	c := &fw.wk.Counters
	if c.Reasons[packet.DropIPv4BadChecksum].Load() != 1 || c.Reasons[ReasonNoRule].Load() != 1 {
		t.Errorf("reasons: bad checksum %d, no rule %d", c.Reasons[packet.DropIPv4BadChecksum].Load(), c.Reasons[ReasonNoRule].Load())
	}
	fw.wk.Step() // refill
	if got := fw.fake.Rings().Frames.Len(); got != free {
		t.Errorf("frames: %d free after, %d before: dropped frames leaked", got, free)
	}
}

func TestWorkerAnswersEcho(t *testing.T) {
	fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(2)}, encap.GUE, 1500)
	for _, v6 := range []bool{false, true} {
		spec := packettest.Spec{Src: netip.MustParseAddr("198.51.100.22"), Dst: netip.AddrFrom16(testVIP).Unmap(), Proto: layers.IPProtocolICMPv4, ICMPType: 8, ICMPID: 7, ICMPSeq: 9, Payload: []byte("ping")}
		if v6 {
			fw = newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(2)}, encap.GUE, 1500)
			vip6 := netip.MustParseAddr("fd00:f1::10")
			fw.w.rule.Match.VIP = vip6.As16()
			fw.w.publish()
			fw.snap.Store(fw.w.snap)
			spec = packettest.Spec{Src: netip.MustParseAddr("fd00:c1::7"), Dst: vip6, Proto: layers.IPProtocolICMPv6, ICMPType: 128, ICMPID: 7, ICMPSeq: 9, Payload: []byte("ping")}
		}
		out := fw.run(packettest.Frame(spec))
		if len(out) != 1 {
			t.Fatalf("v6=%v: %d frames out", v6, len(out))
		}
		// gopacket verifies nothing by itself; recompute with our parser,
		// which checks the IPv4 header checksum, then check ICMP's.
		m, res := packet.Parse(out[0])
		if res != packet.OK {
			t.Fatalf("v6=%v: reply does not parse: %v", v6, res)
		}
		wantType := uint8(0)
		if v6 {
			wantType = 129
		}
		if m.ICMPType != wantType || m.ICMPEchoID != 7 {
			t.Errorf("v6=%v: type %d id %d", v6, m.ICMPType, m.ICMPEchoID)
		}
		if netip.AddrFrom16(m.Src).Unmap() != netip.AddrFrom16(spec.Dst.As16()).Unmap() || netip.AddrFrom16(m.Dst).Unmap() != spec.Src {
			t.Errorf("v6=%v: addresses %v → %v", v6, netip.AddrFrom16(m.Src), netip.AddrFrom16(m.Dst))
		}
		var sum uint16
		if v6 {
			sum = packet.Checksum(out[0][m.L4Off:m.L3End], packet.PseudoHeaderChecksum(packet.ProtoICMPv6, m.Src[:], m.Dst[:], uint32(m.L3End-m.L4Off)))
		} else {
			sum = packet.Checksum(out[0][m.L4Off:m.L3End], 0)
		}
		if sum != 0xffff && sum != 0 {
			t.Errorf("v6=%v: ICMP checksum does not verify (sum %#04x)", v6, sum)
		}
	}
}

func TestWorkerStepAllocatesNothing(t *testing.T) {
	fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(3)}, encap.GUE, 1500)
	if allocs := stepAllocs(fw); allocs != 0 {
		t.Errorf("a worker loop allocates %v times", allocs)
	}
}

// stepAllocs is the allocations of one worker loop over three frames (two
// SYNs and an ACK of unknown flows).
func stepAllocs(fw *fakeWorker) float64 {
	frames := [][]byte{tcpFrame("198.51.100.30", 1, true), tcpFrame("198.51.100.31", 2, false), tcpFrame("198.51.100.32", 3, true)}
	return testing.AllocsPerRun(100, func() {
		for _, f := range frames {
			fw.fake.Deliver(f)
		}
		fw.wk.Step()
		fw.fake.Transmit(64, nil)
	})
}

// The worker reclaims idle entries between batches, without a lookup of
// them: the table's count falls back once the flows went quiet, at one
// pace per millisecond whether the idle loops come every millisecond or
// every 8 (a settled worker's sleep): in an eighth of the loops then.
func TestWorkerSweepsIdleEntries(t *testing.T) {
	for _, sleep := range []time.Duration{0, time.Millisecond, 8 * time.Millisecond} {
		t.Run(fmt.Sprint("loops every ", sleep), func(t *testing.T) {
			fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(3)}, encap.IPIP, 1500)
			// A table of 8 Ki buckets: more than the first idle loop's
			// catch-up after the clock's jump (16 ms' worth) sweeps.
			ct, err := conntrack.New(1<<16, 1)
			if err != nil {
				t.Fatal(err)
			}
			fw.w.q.Conntrack = ct
			fw.wk = NewWorker(fw.fake.Rings(), &fw.snap, *fw.w.q, fw.clock, nil)
			var frames [][]byte
			for i := range 40 {
				frames = append(frames, tcpFrame("198.51.100.40", uint16(1000+i), true))
			}
			fw.run(frames...)
			if ct.Len() != 40 {
				t.Fatalf("%d entries after 40 SYNs", ct.Len())
			}
			fw.clock.Advance(61 * time.Second)
			fw.wk.Step() // the first idle loop after the batch
			perLoop := sweepIdleBuckets * int(max(sleep/time.Millisecond, 1))
			for range ct.Cap() / conntrack.Ways / perLoop {
				fw.clock.Advance(sleep)
				fw.wk.Step()
			}
			if ct.Len() != 0 {
				t.Errorf("%d entries left after every slot was swept past their idle timeout", ct.Len())
			}
		})
	}
}

// TestWorkerSettled: an idle worker is settled (its wait may sleep longer)
// only when it owes the kernel no TX kick, has chunks on the fill ring and
// no exception scan is under way or has its pass's end to hand over.
func TestWorkerSettled(t *testing.T) {
	fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(3)}, encap.IPIP, 1500)
	if !fw.wk.Settled() {
		t.Fatal("a fresh worker with a full fill ring is not settled")
	}
	fw.fake.Deliver(tcpFrame("198.51.100.30", 40000, true))
	fw.wk.Step()
	if fw.wk.Settled() {
		t.Error("settled with a packet on TX the kernel has not taken")
	}
	fw.fake.Transmit(64, nil)
	if !fw.wk.Settled() {
		t.Error("not settled once the kernel took the packet (its completion still pending)")
	}

	// An exception scan whose ring is full: the pass ends but its end
	// cannot be handed over, so the worker has work to finish.
	out, err := spsc.New[Sighting](1)
	if err != nil {
		t.Fatal(err)
	}
	out.Push(&Sighting{})
	fw.wk.ShareExceptions(out, conntrack.TicksPerSecond)
	for range 4 {
		fw.wk.Step()
	}
	if fw.wk.Settled() {
		t.Error("settled with a scan's end not handed over")
	}
	out.Pop(make([]Sighting, 1))
	fw.wk.Step()
	if !fw.wk.Settled() {
		t.Error("not settled once the scan's end was handed over")
	}
}

// TestIdleSweepBudget: an idle loop sweeps for the time since the loop
// before, of any kind: after a long busy stretch one loop's worth, not
// the stretch's.
func TestIdleSweepBudget(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, c := range []struct {
		name        string
		since       int64 // nanoseconds since the loop before
		wantBuckets int
	}{
		{"right after a loop", 0, sweepIdleBuckets},
		{"after 100 µs", ms / 10, sweepIdleBuckets},
		{"after a settled sleep of 8 ms", 8 * ms, 8 * sweepIdleBuckets},
		{"after a minute", 60000 * ms, 16 * sweepIdleBuckets},
	} {
		if got := idleSweep(c.since); got != c.wantBuckets {
			t.Errorf("%s: %d buckets, want %d", c.name, got, c.wantBuckets)
		}
	}
	fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(3)}, encap.IPIP, 1500)
	fw.clock.Advance(time.Minute)
	fw.run(tcpFrame("198.51.100.41", 1000, true)) // a busy loop a minute after the last idle one
	fw.clock.Advance(100 * time.Microsecond)
	if got := idleSweep(fw.clock.Nanotime() - fw.wk.loopAt); got != sweepIdleBuckets {
		t.Errorf("the idle loop right after a busy one would sweep %d buckets, want %d", got, sweepIdleBuckets)
	}
}
