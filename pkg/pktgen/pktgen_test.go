package pktgen

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/ring"
)

var (
	srcMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	dstMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
)

func mustRange(t testing.TB, s string) AddrRange {
	t.Helper()
	r, err := ParseAddrRange(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// verify parses a generated frame and checks every checksum from scratch.
func verify(t *testing.T, f []byte, p Packet) packet.Meta {
	t.Helper()
	m, res := packet.Parse(f)
	if res != packet.OK {
		t.Fatalf("parse: %v\n%x", res, f)
	}
	l4 := f[m.L4Off:m.L3End]
	var src, dst []byte
	if m.Family == packet.IPv4 {
		if c := packet.Checksum(f[m.L3Off:m.L4Off], 0); c != 0xffff {
			t.Fatalf("IPv4 header checksum does not verify (sum %#x)", c)
		}
		src, dst = f[m.L3Off+12:m.L3Off+16], f[m.L3Off+16:m.L3Off+20]
	} else {
		src, dst = f[m.L3Off+8:m.L3Off+24], f[m.L3Off+24:m.L3Off+40]
	}
	stored := binary.BigEndian.Uint16(l4[6:])
	if m.Proto == packet.ProtoTCP {
		stored = binary.BigEndian.Uint16(l4[16:])
	}
	if m.Proto == packet.ProtoUDP && m.Family == packet.IPv4 && !p.UDPChecksum {
		if stored != 0 {
			t.Fatalf("UDP checksum %#x, want 0 without UDPChecksum", stored)
		}
		return m
	}
	ph := packet.PseudoHeaderChecksum(m.Proto, src, dst, uint32(len(l4)))
	if c := packet.Checksum(l4, ph); c != 0xffff {
		t.Fatalf("L4 checksum %#x does not verify (sum %#x)\n%x", stored, c, f)
	}
	return m
}

func TestGeneratorFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Packet
		size int
		l4   uint8
	}{
		{"udp4 default size", Packet{Src: mustRange(t, "198.18.0.1"), Dst: mustRange(t, "198.18.0.42"), SrcPorts: PortRange{9, 109}}, 60, packet.ProtoUDP},
		{"udp4 csum random dst", Packet{Src: mustRange(t, "198.18.0.0/15"), Dst: mustRange(t, "198.51.100.0/24"), DstPorts: PortRange{433, 444}, UDPChecksum: true, Size: 1500}, 1500, packet.ProtoUDP},
		{"udp4 odd size", Packet{Src: mustRange(t, "198.18.0.0/30"), Dst: mustRange(t, "198.18.0.42"), UDPChecksum: true, Size: 61}, 61, packet.ProtoUDP},
		{"syn4 flows", Packet{Src: mustRange(t, "198.19.0.0/16"), Dst: mustRange(t, "203.0.113.10"), DstPorts: PortRange{80, 80}, SrcPorts: PortRange{1024, 65535}, Proto: TCPSYN, Flows: 100, FlowLen: 3}, 60, packet.ProtoTCP},
		{"ack4 big", Packet{Src: mustRange(t, "198.19.0.0/16"), Dst: mustRange(t, "203.0.113.10"), Proto: TCPACK, Size: 1000}, 1000, packet.ProtoTCP},
		{"udp6 raised to headers", Packet{Src: mustRange(t, "fd00::1-fd00::ff"), Dst: mustRange(t, "fd00::1")}, 62, packet.ProtoUDP},
		{"syn6 /64", Packet{Src: mustRange(t, "fd00:51::/64"), Dst: mustRange(t, "fd00:203:113::10"), Proto: TCPSYN, SrcPorts: PortRange{1, 65535}}, 74, packet.ProtoTCP},
		{"ack6 flows", Packet{Src: mustRange(t, "fd00:51::/120"), Dst: mustRange(t, "fd00:203:113::10-fd00:203:113::12"), Proto: TCPACK, Flows: 1000, FlowLen: 2, Size: 200}, 200, packet.ProtoTCP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.SrcMAC, tc.p.DstMAC = srcMAC, dstMAC
			g, err := NewGenerator(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if g.Size() != tc.size {
				t.Fatalf("size %d, want %d", g.Size(), tc.size)
			}
			verify(t, g.Template(), tc.p)
			f := append([]byte(nil), g.Template()...)
			for range 500 {
				g.Next(f)
				m := verify(t, f, tc.p)
				if m.Proto != tc.l4 {
					t.Fatalf("protocol %d, want %d", m.Proto, tc.l4)
				}
				src, dst := netip.AddrFrom16(m.Src).Unmap(), netip.AddrFrom16(m.Dst).Unmap()
				if src.Less(tc.p.Src.First) || tc.p.Src.Last.Less(src) || dst.Less(tc.p.Dst.First) || tc.p.Dst.Last.Less(dst) {
					t.Fatalf("%s → %s outside %s → %s", src, dst, tc.p.Src, tc.p.Dst)
				}
				q := tc.p.withDefaults()
				if m.SrcPort < q.SrcPorts.Min || m.SrcPort > q.SrcPorts.Max || m.DstPort < q.DstPorts.Min || m.DstPort > q.DstPorts.Max {
					t.Fatalf("ports %d → %d outside %s → %s", m.SrcPort, m.DstPort, q.SrcPorts, q.DstPorts)
				}
				if !bytes.Equal(f[:6], dstMAC) || !bytes.Equal(f[6:12], srcMAC) {
					t.Fatalf("MACs %x → %x", f[6:12], f[:6])
				}
				if tc.p.Proto == TCPSYN && m.TCPFlags != packet.TCPFlagSYN || tc.p.Proto == TCPACK && m.TCPFlags != packet.TCPFlagACK {
					t.Fatalf("TCP flags %#x for %v", m.TCPFlags, tc.p.Proto)
				}
			}
		})
	}
}

// TestFlowsSemantics: Flows distinct tuples, FlowLen packets each, in
// turn, then the same flows again (pktgen's flows/flowlen with FLOW_SEQ).
func TestFlowsSemantics(t *testing.T) {
	p := Packet{SrcMAC: srcMAC, DstMAC: dstMAC, Src: mustRange(t, "198.19.0.0/16"), Dst: mustRange(t, "203.0.113.10"),
		Proto: TCPSYN, Flows: 1 << 16, FlowLen: 2}
	g, err := NewGenerator(p)
	if err != nil {
		t.Fatal(err)
	}
	f := append([]byte(nil), g.Template()...)
	seen := map[packet.Tuple]int{}
	var order []packet.Tuple
	for i := range 2 * p.Flows * p.FlowLen {
		g.Next(f)
		m, _ := packet.Parse(f)
		if i < p.Flows*p.FlowLen {
			if i%2 == 0 {
				order = append(order, m.Tuple)
			} else if m.Tuple != order[len(order)-1] {
				t.Fatalf("packet %d left its flow before flowlen", i)
			}
		} else if want := order[(i-p.Flows*p.FlowLen)/2]; m.Tuple != want {
			t.Fatalf("packet %d: second round is not the same flows in order", i)
		}
		seen[m.Tuple]++
	}
	if len(seen) != p.Flows {
		t.Fatalf("%d distinct flows, want %d", len(seen), p.Flows)
	}
	srcs := map[[16]byte]bool{}
	for tu, n := range seen {
		srcs[tu.Src] = true
		if n != 4 {
			t.Fatalf("flow sent %d times, want 4", n)
		}
	}
	if len(srcs) != 1<<16 {
		t.Fatalf("%d sources, want 2^16", len(srcs))
	}
}

func TestRandomFieldsSpread(t *testing.T) {
	p := Packet{SrcMAC: srcMAC, DstMAC: dstMAC, Src: mustRange(t, "198.18.0.1"), Dst: mustRange(t, "198.18.0.42"), SrcPorts: PortRange{9, 109}}
	g, err := NewGenerator(p)
	if err != nil {
		t.Fatal(err)
	}
	f := append([]byte(nil), g.Template()...)
	ports := map[uint16]bool{}
	for range 10000 {
		g.Next(f)
		m, _ := packet.Parse(f)
		ports[m.SrcPort] = true
	}
	if len(ports) != 101 {
		t.Fatalf("%d source ports of 9-109 seen in 10000 packets", len(ports))
	}
}

func TestParseRanges(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"198.18.0.42", "198.18.0.42"},
		{"198.18.0.0/15", "198.18.0.0-198.19.255.255"},
		{"198.18.0.7/24", "198.18.0.0-198.18.0.255"},
		{"fd00::1-fd00::ff", "fd00::1-fd00::ff"},
		{"fd00:51::/64", "fd00:51::-fd00:51::ffff:ffff:ffff:ffff"},
		{"::ffff:198.18.0.1", "198.18.0.1"},
	} {
		r, err := ParseAddrRange(tc.in)
		if err != nil || r.String() != tc.want {
			t.Errorf("ParseAddrRange(%q) = %s, %v; want %s", tc.in, r, err, tc.want)
		}
	}
	for _, bad := range []string{"", "x", "198.18.0.9-198.18.0.1", "198.18.0.1-fd00::1", "fd00::/48", "198.18.0.0/33"} {
		if _, err := ParseAddrRange(bad); err == nil {
			t.Errorf("ParseAddrRange(%q) accepted", bad)
		}
	}
	for _, tc := range []struct {
		in   string
		want PortRange
	}{{"80", PortRange{80, 80}}, {"433-444", PortRange{433, 444}}, {"1-65535", PortRange{1, 65535}}} {
		if r, err := ParsePortRange(tc.in); err != nil || r != tc.want {
			t.Errorf("ParsePortRange(%q) = %v, %v", tc.in, r, err)
		}
	}
	for _, bad := range []string{"0", "444-433", "1-65536", "a-b", ""} {
		if _, err := ParsePortRange(bad); err == nil {
			t.Errorf("ParsePortRange(%q) accepted", bad)
		}
	}
}

func TestValidate(t *testing.T) {
	good := Config{Ifname: "eth0", Packet: Packet{SrcMAC: srcMAC, DstMAC: dstMAC, Src: mustRange(t, "198.18.0.1"), Dst: mustRange(t, "198.18.0.42")}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"no interface":   func(c *Config) { c.Ifname = "" },
		"mixed families": func(c *Config) { c.Dst = mustRange(t, "fd00::1") },
		"no dst mac":     func(c *Config) { c.DstMAC = nil },
		"huge":           func(c *Config) { c.Size = 5000 },
		"batch":          func(c *Config) { c.Batch = 4096 },
		"bind":           func(c *Config) { c.Bind = "fast" },
		"rate":           func(c *Config) { c.Rate = -1 },
	} {
		c := good
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestResultLines: the exact lines pktgen prints, from given counters.
func TestResultLines(t *testing.T) {
	for _, tc := range []struct {
		r    Result
		want string
	}{
		{Result{Elapsed: 13101142 * time.Microsecond, Idle: 880401 * time.Microsecond, Packets: 10000000, Size: 60, Errors: 39664},
			"Result: OK: 13101142(c12220741+d880401) usec, 10000000 (60byte,0frags)\n  763292pps 366Mb/sec (366380160bps) errors: 39664\n"},
		{Result{Elapsed: time.Second, Packets: 1000, Size: 1500},
			"Result: OK: 1000000(c1000000+d0) usec, 1000 (1500byte,0frags)\n  1000pps 12Mb/sec (12000000bps) errors: 0\n"},
		{Result{Size: 60},
			"Result: OK: 0(c0+d0) usec, 0 (60byte,0frags)\n  0pps 0Mb/sec (0bps) errors: 0\n"},
		{Result{Elapsed: 2500 * time.Millisecond, Idle: 500*time.Millisecond + 400, Packets: 1 << 40, Size: 64},
			"Result: OK: 2500000(c1999999+d500000) usec, 1099511627776 (64byte,0frags)\n  439804651110pps 225179981Mb/sec (225179981368320bps) errors: 0\n"},
	} {
		var b strings.Builder
		if _, err := tc.r.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("got\n%q\nwant\n%q", b.String(), tc.want)
		}
	}
	rep := Report{Ifname: "veth0", Results: []Result{
		{Device: "veth0@0", Elapsed: time.Second, Packets: 10, Size: 60},
		{Device: "veth0@1", Elapsed: time.Second, Packets: 20, Size: 60, Errors: 1},
	}}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "Device: veth0@0\nResult: OK: 1000000(c1000000+d0) usec, 10 (60byte,0frags)\n  10pps 0Mb/sec (4800bps) errors: 0\n" +
		"Device: veth0@1\nResult: OK: 1000000(c1000000+d0) usec, 20 (60byte,0frags)\n  20pps 0Mb/sec (9600bps) errors: 1\n"
	if b.String() != want {
		t.Errorf("report:\n%s\nwant\n%s", b.String(), want)
	}
	j := rep.JSON()
	if j.Packets != 30 || j.PPS != 30 || j.Errors != 1 || j.BPS != 14400 || len(j.Threads) != 2 || j.Threads[1].Device != "veth0@1" {
		t.Errorf("json %+v", j)
	}
}

func newFakeSender(t testing.TB, p Packet, batch int) (*ring.Fake, *sender) {
	t.Helper()
	fake, err := ring.NewFake(ring.Options{NumFrames: 512, RingSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGenerator(p)
	if err != nil {
		t.Fatal(err)
	}
	return fake, newSender(fake.Rings(), g, batch)
}

// TestSenderOverFake: every frame the "kernel" takes is a whole valid
// packet of the configured flows, frames cycle through completion, and
// the loop allocates nothing.
func TestSenderOverFake(t *testing.T) {
	p := Packet{SrcMAC: srcMAC, DstMAC: dstMAC, Src: mustRange(t, "198.19.0.0/16"), Dst: mustRange(t, "203.0.113.10"), Proto: TCPSYN, Flows: 1000, FlowLen: 1}
	fake, s := newFakeSender(t, p, 64)
	tuples := map[packet.Tuple]bool{}
	sent := 0
	for range 100 {
		s.Reclaim()
		s.Send(64)
		if err := s.Kick(); err != nil {
			t.Fatal(err)
		}
		fake.Transmit(64, func(f []byte) {
			m := verify(t, f, p)
			tuples[m.Tuple] = true
			sent++
		})
	}
	s.Reclaim()
	if sent != 6400 || s.Submitted != 6400 || s.Completed != 6400 || s.Outstanding() != 0 {
		t.Fatalf("sent %d, submitted %d, completed %d", sent, s.Submitted, s.Completed)
	}
	if len(tuples) != 1000 {
		t.Fatalf("%d flows, want 1000", len(tuples))
	}
	allocs := testing.AllocsPerRun(100, func() {
		s.Reclaim()
		s.Send(64)
		_ = s.Kick()
		fake.Transmit(64, nil)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch", allocs)
	}
}

// TestSenderStopsWhenRingFull: with the kernel not draining, Send stops
// at the TX ring's size and reports what it submitted.
func TestSenderStopsWhenRingFull(t *testing.T) {
	p := Packet{SrcMAC: srcMAC, DstMAC: dstMAC, Src: mustRange(t, "198.18.0.1"), Dst: mustRange(t, "198.18.0.42")}
	_, s := newFakeSender(t, p, 64)
	total := 0
	for range 10 {
		total += s.Send(64)
	}
	if total != 256 || s.Outstanding() != 256 {
		t.Fatalf("submitted %d with a 256-slot ring, outstanding %d", total, s.Outstanding())
	}
}

func BenchmarkSend(b *testing.B) {
	for _, tc := range []struct {
		name string
		p    Packet
	}{
		{"udp4-random-ports", Packet{Src: mustRange(b, "198.18.0.1"), Dst: mustRange(b, "198.18.0.42"), SrcPorts: PortRange{9, 109}}},
		{"syn4-flows", Packet{Src: mustRange(b, "198.19.0.0/16"), Dst: mustRange(b, "203.0.113.10"), Proto: TCPSYN, Flows: 1 << 16, FlowLen: 1}},
		{"udp6-csum-1500", Packet{Src: mustRange(b, "fd00:51::/64"), Dst: mustRange(b, "fd00::1"), Size: 1500}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tc.p.SrcMAC, tc.p.DstMAC = srcMAC, dstMAC
			fake, s := newFakeSender(b, tc.p, 64)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				s.Reclaim()
				n += s.Send(64)
				fake.Transmit(64, nil)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/pkt")
		})
	}
}
