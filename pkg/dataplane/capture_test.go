package dataplane

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/capture"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/packettest"
)

type captured struct {
	rec  capture.Record
	data []byte
}

func drainAll(s *capture.Session) []captured {
	var out []captured
	s.Drain(func(_ int, r *capture.Record, d []byte) { out = append(out, captured{*r, bytes.Clone(d)}) })
	return out
}

// TestCaptureRXAndTX: with a tap, the worker records each packet as it
// arrived (before encapsulation rewrote the frame) and as it was sent,
// with its outcome; a drop carries its reason and no TX copy.
func TestCaptureRXAndTX(t *testing.T) {
	fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(3)}, encap.IPIP, 1500)
	s, err := capture.NewSession(capture.Filter{}, 1, capture.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fw.wk.SetCapture(s.Tap(0))
	in := tcpFrame("198.51.100.20", 40000, true)
	notOurs := packettest.Frame(packettest.Spec{Src: netip.MustParseAddr("198.51.100.21"), Dst: netip.MustParseAddr("203.0.113.99"), Proto: layers.IPProtocolUDP, SrcPort: 1, DstPort: 2})
	out := fw.run(bytes.Clone(in), notOurs)
	got := drainAll(s)
	if len(got) != 3 || len(out) != 1 {
		t.Fatalf("%d records, %d frames sent; want 3 records (rx, tx, rx drop) and 1 frame", len(got), len(out))
	}
	backend := fw.w.maglev(tcp("198.51.100.20", 40000, syn))
	want := netip.MustParseAddr(backend).As16()
	rx, tx, dropped := got[0], got[1], got[2]
	if rx.rec.Point != capture.RX || !bytes.Equal(rx.data, in) || rx.rec.Verdict != uint8(Tx) || !rx.rec.HasBackend || rx.rec.BackendAddr != want || rx.rec.Rule != 0 || !rx.rec.HasRule {
		t.Errorf("rx record %+v (frame equal: %v)", rx.rec, bytes.Equal(rx.data, in))
	}
	if tx.rec.Point != capture.TX || !bytes.Equal(tx.data, out[0]) || tx.rec.BackendAddr != want {
		t.Errorf("tx record %+v (frame equal: %v)", tx.rec, bytes.Equal(tx.data, out[0]))
	}
	if dropped.rec.Point != capture.RX || dropped.rec.Verdict != uint8(Drop) || dropped.rec.Reason != uint8(ReasonNoRule) || dropped.rec.HasRule || !bytes.Equal(dropped.data, notOurs) {
		t.Errorf("dropped record %+v", dropped.rec)
	}
	if rx.rec.Time == 0 || rx.rec.Time != dropped.rec.Time {
		t.Errorf("times %d %d: want one non-zero time per batch", rx.rec.Time, dropped.rec.Time)
	}

	// Filters: only drops, only TX, only another backend.
	for _, tc := range []struct {
		name string
		f    capture.Filter
		want int
	}{
		{"drops", capture.Filter{Verdicts: 1 << Drop}, 1},
		{"tx point", capture.Filter{Points: capture.TX}, 1},
		{"no-rule reason, rx", capture.Filter{ByReason: true, Reason: uint8(ReasonNoRule), Points: capture.RX}, 1},
		{"the backend", capture.Filter{Backend: netip.MustParseAddr(backend)}, 2},
		{"another backend", capture.Filter{Backend: netip.MustParseAddr("192.0.2.99")}, 0},
		{"client port", capture.Filter{Port: 40001}, 2},
	} {
		s, _ := capture.NewSession(tc.f, 1, capture.Options{})
		fw.wk.SetCapture(s.Tap(0))
		fw.run(tcpFrame("198.51.100.20", 40001, true), notOurs)
		if got := drainAll(s); len(got) != tc.want {
			t.Errorf("%s: %d records, want %d", tc.name, len(got), tc.want)
		}
	}
	fw.wk.SetCapture(nil)
	fw.run(tcpFrame("198.51.100.20", 40002, true))
	if n := s.Drain(func(int, *capture.Record, []byte) {}); n != 0 {
		t.Errorf("%d records after the capture stopped", n)
	}
}

// TestCaptureFinalOutcome: a packet the worker decided to send but then
// dropped (no next hop) is recorded as that drop, with its backend.
func TestCaptureFinalOutcome(t *testing.T) {
	fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(3)}, encap.IPIP, 1500)
	for i := range fw.w.rule.Backends {
		fw.w.rule.Backends[i].Template = nil
	}
	fw.w.publish()
	fw.snap.Store(fw.w.snap)
	s, _ := capture.NewSession(capture.Filter{}, 1, capture.Options{})
	fw.wk.SetCapture(s.Tap(0))
	fw.run(tcpFrame("198.51.100.20", 40000, true))
	got := drainAll(s)
	if len(got) != 1 || got[0].rec.Verdict != uint8(Drop) || got[0].rec.Reason != uint8(ReasonNoNextHop) || !got[0].rec.HasBackend {
		t.Fatalf("records %+v, want one rx drop no-next-hop with its backend", got)
	}
	c := &fw.wk.Counters
	if c.Verdicts[Tx].Load() != 0 || c.Verdicts[Drop].Load() != 1 || c.Reasons[ReasonNoNextHop].Load() != 1 {
		t.Errorf("verdicts tx %d drop %d; no-next-hop %d: a packet counts once, under its final outcome",
			c.Verdicts[Tx].Load(), c.Verdicts[Drop].Load(), c.Reasons[ReasonNoNextHop].Load())
	}
}

// TestCaptureStepAllocatesNothing: a worker with a capture running
// allocates nothing either.
func TestCaptureStepAllocatesNothing(t *testing.T) {
	fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(3)}, encap.GUE, 1500)
	s, _ := capture.NewSession(capture.Filter{}, 1, capture.Options{Rate: capture.MaxRate})
	fw.wk.SetCapture(s.Tap(0))
	if allocs := stepAllocs(fw); allocs != 0 {
		t.Errorf("a worker loop with a capture allocates %v times", allocs)
	}
	if st := s.Stats(); st.Captured == 0 {
		t.Error("nothing captured")
	}
}

// TestConnectionStats: per backend, packets, IP bytes and new connections
// (a SYN, and a miss of a tracked flow); a FIN or RST marks the entry
// closed (inactive), a new SYN of the same flow makes it active again.
func TestConnectionStats(t *testing.T) {
	fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(1)}, encap.IPIP, 1500)
	ct := fw.w.q.Conntrack
	entry := func(sport uint16) (closed, found bool) {
		m := tcp("198.51.100.20", sport, ack).meta()
		var k hash.Key
		k.SetTracking(m, hash.AffinityNone, hash.PerConnection)
		return ct.Closed(&k, 0)
	}
	frame := func(sport uint16, s packettest.Spec) []byte {
		s.Src, s.Dst, s.Proto, s.SrcPort, s.DstPort, s.Payload = netip.MustParseAddr("198.51.100.20"), netip.AddrFrom16(testVIP).Unmap(), layers.IPProtocolTCP, sport, 80, []byte("hello")
		return packettest.Frame(s)
	}
	fw.run(frame(1000, packettest.Spec{SYN: true}), frame(1000, packettest.Spec{ACK: true}))
	if closed, ok := entry(1000); !ok || closed {
		t.Fatalf("after SYN, ACK: entry found %v closed %v", ok, closed)
	}
	fw.run(frame(1000, packettest.Spec{ACK: true, FIN: true}))
	if closed, _ := entry(1000); !closed {
		t.Error("a FIN did not close the entry")
	}
	fw.run(frame(1000, packettest.Spec{ACK: true})) // the last ACK: still closed
	if closed, _ := entry(1000); !closed {
		t.Error("an ACK after the FIN reopened the entry")
	}
	fw.run(frame(1000, packettest.Spec{SYN: true})) // the port is reused
	if closed, _ := entry(1000); closed {
		t.Error("a new SYN left the entry closed")
	}
	fw.run(frame(2000, packettest.Spec{ACK: true, RST: true})) // a miss that is an RST
	if closed, ok := entry(2000); !ok || !closed {
		t.Errorf("an RST that created the entry: found %v closed %v", ok, closed)
	}
	got := fw.wk.Backends.Totals(0, 0)
	m, _ := packet.Parse(frame(1, packettest.Spec{ACK: true}))
	size := uint64(m.L3End - m.L3Off)
	// Packets: SYN, ACK, FIN, ACK, SYN, RST; new: SYN, SYN, and the RST's miss.
	if got.Packets != 6 || got.Bytes != 6*size || got.Conns != 3 {
		t.Errorf("totals %+v, want 6 packets, %d bytes, 3 new connections", got, 6*size)
	}
}
