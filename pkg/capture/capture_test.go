package capture

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/packettest"
)

func meta(t *testing.T, src string, sport uint16, dst string, dport uint16, proto layers.IPProtocol) (*packet.Meta, []byte) {
	t.Helper()
	f := packettest.Frame(packettest.Spec{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), Proto: proto, SrcPort: sport, DstPort: dport, ACK: true, Payload: []byte("x")})
	m, r := packet.Parse(f)
	if r != packet.OK {
		t.Fatalf("parse: %v", r)
	}
	return &m, f
}

func TestFilter(t *testing.T) {
	m4, _ := meta(t, "198.51.100.7", 40000, "203.0.113.10", 80, layers.IPProtocolTCP)
	m6, _ := meta(t, "2001:db8::7", 40000, "2001:db8:1::10", 443, layers.IPProtocolUDP)
	be := netip.MustParseAddr("10.0.1.10")
	tx := Outcome{Verdict: 2, HasRule: true, Rule: 3, HasBackend: true, BackendAddr: be.As16()}
	noRule := Outcome{Verdict: 0, Reason: 20}
	for _, tc := range []struct {
		name string
		f    Filter
		m    *packet.Meta
		o    Outcome
		p    Point
		want bool
	}{
		{"zero takes all", Filter{}, m4, tx, TX, true},
		{"zero takes drops", Filter{}, m4, noRule, RX, true},
		{"point rx refuses tx", Filter{Points: RX}, m4, tx, TX, false},
		{"point tx takes tx", Filter{Points: TX}, m4, tx, TX, true},
		{"rule", Filter{ByRule: true, Rule: 3}, m4, tx, RX, true},
		{"other rule", Filter{ByRule: true, Rule: 4}, m4, tx, RX, false},
		{"rule, packet without", Filter{ByRule: true, Rule: 0}, m4, noRule, RX, false},
		{"backend", Filter{Backend: be}, m4, tx, RX, true},
		{"other backend", Filter{Backend: netip.MustParseAddr("10.0.1.11")}, m4, tx, RX, false},
		{"backend, drop without", Filter{Backend: be}, m4, noRule, RX, false},
		{"verdict tx", Filter{Verdicts: 1 << 2}, m4, tx, RX, true},
		{"verdict drop refuses tx", Filter{Verdicts: 1 << 0}, m4, tx, RX, false},
		{"verdict drop", Filter{Verdicts: 1 << 0}, m4, noRule, RX, true},
		{"reason", Filter{ByReason: true, Reason: 20}, m4, noRule, RX, true},
		{"other reason", Filter{ByReason: true, Reason: 21}, m4, noRule, RX, false},
		{"src prefix", Filter{Src: netip.MustParsePrefix("198.51.100.0/24")}, m4, tx, RX, true},
		{"src host", Filter{Src: netip.MustParsePrefix("198.51.100.7/32")}, m4, tx, RX, true},
		{"src other", Filter{Src: netip.MustParsePrefix("198.51.101.0/24")}, m4, tx, RX, false},
		{"v4 prefix, v6 packet", Filter{Src: netip.MustParsePrefix("0.0.0.0/0")}, m6, tx, RX, false},
		{"v4 any takes v4", Filter{Src: netip.MustParsePrefix("0.0.0.0/0")}, m4, tx, RX, true},
		{"v6 prefix", Filter{Dst: netip.MustParsePrefix("2001:db8:1::/48")}, m6, tx, RX, true},
		{"v6 prefix other", Filter{Dst: netip.MustParsePrefix("2001:db8:2::/48")}, m6, tx, RX, false},
		{"dst port", Filter{DstPort: 80}, m4, tx, RX, true},
		{"dst port other", Filter{DstPort: 443}, m4, tx, RX, false},
		{"src port", Filter{SrcPort: 40000}, m4, tx, RX, true},
		{"port either", Filter{Port: 40000}, m4, tx, RX, true},
		{"port either, dst", Filter{Port: 80}, m4, tx, RX, true},
		{"port none", Filter{Port: 81}, m4, tx, RX, false},
		{"proto", Filter{Proto: 17}, m6, tx, RX, true},
		{"proto other", Filter{Proto: 6}, m6, tx, RX, false},
		{"flow filter, unparsed frame", Filter{Port: 80}, &packet.Meta{}, noRule, RX, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSession(tc.f, 1, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Tap(0).Match(tc.p, tc.m, &tc.o); got != tc.want {
				t.Errorf("Match = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []Options{{Snaplen: 10}, {Snaplen: 70000}, {Rate: -1}, {Rate: MaxRate + 1}, {Slots: 1}, {Slots: 1 << 20}} {
		if _, err := NewSession(Filter{}, 1, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	s, err := NewSession(Filter{}, 2, Options{Slots: 100})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(s.Tap(1).recs); got != 128 {
		t.Errorf("100 slots rounded to %d, want 128", got)
	}
}

// drain collects a session's records as (record, bytes).
func drain(s *Session) (recs []Record, data [][]byte) {
	s.Drain(func(_ int, r *Record, d []byte) {
		recs = append(recs, *r)
		data = append(data, bytes.Clone(d))
	})
	return recs, data
}

func TestTapStageCommitPut(t *testing.T) {
	s, err := NewSession(Filter{Verdicts: 1 << 2}, 1, Options{Snaplen: 64})
	if err != nil {
		t.Fatal(err)
	}
	tp := s.Tap(0)
	tp.Begin(1e9)
	rx := bytes.Repeat([]byte{1}, 100)
	txf := bytes.Repeat([]byte{2}, 50)
	o := Outcome{Verdict: 2}
	if !tp.Stage(rx) {
		t.Fatal("stage refused")
	}
	rx[0] = 9 // the frame is rewritten after the copy
	tp.Commit(&o)
	tp.Put(TX, &o, txf)
	// A staged copy never committed (the verdict turned out unwanted) is
	// overwritten by the next one.
	tp.Stage(bytes.Repeat([]byte{3}, 70))
	tp.Commit(&o)
	recs, data := drain(s)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	if r := recs[0]; r.Point != RX || r.Len != 100 || r.CapLen != 64 || r.Time != 1e9 || data[0][0] != 1 || len(data[0]) != 64 {
		t.Errorf("rx record %+v data[0]=%d len %d", r, data[0][0], len(data[0]))
	}
	if r := recs[1]; r.Point != TX || r.Len != 50 || r.CapLen != 50 || !bytes.Equal(data[1], txf) {
		t.Errorf("tx record %+v", r)
	}
	if recs[2].Len != 70 || data[2][0] != 3 {
		t.Errorf("third record %+v", recs[2])
	}
	tp.Stage(rx) // staged, never committed: nothing published
	if recs, _ := drain(s); len(recs) != 0 {
		t.Errorf("uncommitted stage published %d records", len(recs))
	}
	if st := s.Stats(); st.Captured != 3 || st.Limited != 0 || st.Lost != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestTapRingFull(t *testing.T) {
	s, _ := NewSession(Filter{}, 1, Options{Slots: 8, Rate: MaxRate})
	tp := s.Tap(0)
	tp.Begin(1)
	o := Outcome{}
	n := 0
	for range 20 {
		if tp.Put(RX, &o, []byte("frame")) {
			n++
		}
	}
	if n != 8 {
		t.Errorf("%d records fit an 8-slot ring", n)
	}
	if st := s.Stats(); st.Lost != 12 || st.Captured != 8 {
		t.Errorf("stats %+v, want 8 captured, 12 lost", st)
	}
	if recs, _ := drain(s); len(recs) != 8 {
		t.Errorf("drained %d", len(recs))
	}
	if !tp.Put(RX, &o, []byte("again")) { // room again after the drain
		t.Error("no room after a drain")
	}
}

func TestTapRateLimit(t *testing.T) {
	const rate = 2000 // burst 100 (rate/20)
	s, _ := NewSession(Filter{}, 1, Options{Slots: 4096, Rate: rate})
	tp := s.Tap(0)
	o := Outcome{}
	now := int64(1e12)
	put := func(n int) (ok int) {
		for range n {
			if tp.Put(RX, &o, []byte("f")) {
				ok++
			}
		}
		return ok
	}
	tp.Begin(now)
	if got := put(1000); got != 100 {
		t.Errorf("first burst: %d admitted, want 100", got)
	}
	now += int64(time.Second / 10) // 0.1 s: 200 more earned, capped at the burst of 100
	tp.Begin(now)
	if got := put(1000); got != 100 {
		t.Errorf("after 0.1 s: %d admitted, want 100 (burst cap)", got)
	}
	now += int64(time.Second / 40) // 25 ms: 50 records
	tp.Begin(now)
	if got := put(1000); got != 50 {
		t.Errorf("after 25 ms: %d admitted, want 50", got)
	}
	if st := s.Stats(); st.Limited != 3000-250 {
		t.Errorf("limited %d, want %d", st.Limited, 3000-250)
	}
}

// TestTapAllocs: the worker's side of a tap allocates nothing.
func TestTapAllocs(t *testing.T) {
	s, _ := NewSession(Filter{Src: netip.MustParsePrefix("198.51.100.0/24"), Port: 80}, 1, Options{Rate: MaxRate})
	tp := s.Tap(0)
	m, f := meta(t, "198.51.100.7", 40000, "203.0.113.10", 80, layers.IPProtocolTCP)
	o := Outcome{Verdict: 2, HasRule: true}
	now := int64(1)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 1e6
		tp.Begin(now)
		if tp.MatchFlow(m, &o) && tp.Stage(f) && tp.Match(RX, m, &o) {
			tp.Commit(&o)
		}
		if tp.Match(TX, m, &o) {
			tp.Put(TX, &o, f)
		}
		tp.read(func(*Record, []byte) {})
	})
	if allocs != 0 {
		t.Errorf("%v allocations per packet", allocs)
	}
	if st := s.Stats(); st.Captured < 2000 {
		t.Errorf("captured %d of 2002", st.Captured)
	}
}

func testPackets(t *testing.T) []Packet {
	_, f := meta(t, "198.51.100.7", 40000, "203.0.113.10", 80, layers.IPProtocolTCP)
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	return []Packet{
		{Time: at, Queue: 0, Point: "rx", Verdict: "tx", Rule: "web", Backend: "10.0.1.10", Len: len(f), Data: f},
		{Time: at.Add(time.Microsecond), Queue: 1, Point: "rx", Verdict: "drop", Reason: "no-rule", Len: len(f), Data: f},
		{Time: at.Add(2 * time.Microsecond), Queue: 0, Point: "tx", Verdict: "tx", Rule: "web", Backend: "10.0.1.10", Len: len(f) + 20, Data: f[:40]},
	}
}

// writeAll writes pkts in format and closes the writer with dropped.
func writeAll(t *testing.T, format string, pkts []Packet, dropped uint64) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(format, &buf, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pkts {
		if err := w.Write(&pkts[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(dropped); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func TestWritePcapNG(t *testing.T) {
	pkts := testPackets(t)
	r, err := pcapgo.NewNgReader(writeAll(t, FormatPcapNG, pkts, 7), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"rx:tx", "rx:drop:no-rule", "tx:tx"} {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		intf, err := r.Interface(ci.InterfaceIndex)
		if err != nil {
			t.Fatal(err)
		}
		if intf.Name != want {
			t.Errorf("packet %d on interface %q, want %q", i, intf.Name, want)
		}
		if !bytes.Equal(data, pkts[i].Data) || ci.Length != max(pkts[i].Len, len(pkts[i].Data)) || !ci.Timestamp.Equal(pkts[i].Time) {
			t.Errorf("packet %d: %d bytes, length %d, time %v", i, len(data), ci.Length, ci.Timestamp)
		}
	}
	if _, _, err := r.ReadPacketData(); err == nil {
		t.Error("a fourth packet")
	}
	// The statistics block after the packets: the refused packets.
	if intf, err := r.Interface(0); err != nil || intf.Statistics.PacketsDropped != 7 || intf.Description != "xlb rx: tx" || intf.TimestampResolution != 9 {
		t.Errorf("interface 0: %+v, %v", intf, err)
	}
}

func TestWriteEmptyPcapNG(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(FormatPcapNG, &buf, 128)
	if err := w.Close(0); err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewNgReader(&buf, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatalf("empty capture unreadable: %v", err)
	}
	if _, _, err := r.ReadPacketData(); err == nil {
		t.Error("a packet in an empty capture")
	}
}

func TestWritePcap(t *testing.T) {
	pkts := testPackets(t)
	r, err := pcapgo.NewReader(writeAll(t, FormatPcap, pkts, 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		t.Errorf("link type %v", r.LinkType())
	}
	for i := range pkts {
		data, ci, err := r.ReadPacketData()
		if err != nil || !bytes.Equal(data, pkts[i].Data) || !ci.Timestamp.Equal(pkts[i].Time) {
			t.Errorf("packet %d: %v, %d bytes at %v", i, err, len(data), ci.Timestamp)
		}
	}
}

func TestWriteListing(t *testing.T) {
	buf := writeAll(t, FormatListing, testPackets(t), 3)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		"1 03:04:05.123456 q0 rx tx rule web → 10.0.1.10  IPv4 198.51.100.7 > 203.0.113.10 | TCP 40000 > 80 [.]  len 60",
		"2 03:04:05.123457 q1 rx drop no-rule  IPv4 198.51.100.7 > 203.0.113.10 | TCP 40000 > 80 [.]  len 60",
		"3 03:04:05.123458 q0 tx tx rule web → 10.0.1.10  IPv4 198.51.100.7 > 203.0.113.10 | (cut)  len 80",
		"3 packets not captured (rate limit or a full ring)",
	}
	if len(lines) != len(want) {
		t.Fatalf("got\n%s", buf.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
}

func TestUnknownFormat(t *testing.T) {
	if _, err := NewWriter("json", &bytes.Buffer{}, 64); err == nil {
		t.Error("json accepted")
	}
}
