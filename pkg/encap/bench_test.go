package encap_test

import (
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/packettest"
)

// reportPerPacket reports wall-clock ns/pkt and, where the OS tells, the
// process CPU time per packet (cpu-ns/pkt), which a busy machine inflates
// less.
func reportPerPacket(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
	if c := cpuTime(); c > 0 {
		b.ReportMetric(float64((c-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/pkt")
	}
}

type perfCase struct {
	name string
	spec encap.Spec
	in   []byte
}

// A 64-byte-class TCP segment per family, and 1400-byte inner packets for
// the IPv6 GUE checksum: TCP takes the local-checksum-offload path, an
// ICMPv6 echo of the same size the full sum.
func perfCases() []perfCase {
	tcp6Big := packettest.IPv6{Src: client6, Dst: vip6, Next: 6}.Build(packettest.L4Checksum(client6, vip6, 6, packettest.TCP(40000, 443, ackPsh, packettest.Pattern(1340, 3, 7)...)))
	echo6Big := packettest.IPv6{Src: client6, Dst: vip6, Next: 58}.Build(packettest.L4Checksum(client6, vip6, 58, packettest.ICMP(128, 0, 1, packettest.Pattern(1352, 3, 7)...)))
	return []perfCase{
		{"ipip4", spec(encap.IPIP, false), frame(-1, 0x0800, tcp4)},
		{"ipip6", spec(encap.IPIP, true), frame(-1, 0x86dd, tcp6)},
		{"gue4", spec(encap.GUE, false), frame(-1, 0x0800, tcp4)},
		{"gue6", spec(encap.GUE, true), frame(-1, 0x86dd, tcp6)},
		{"gue6-tcp1400-lco", spec(encap.GUE, true), frame(-1, 0x86dd, tcp6Big)},
		{"gue6-icmp1400-fullsum", spec(encap.GUE, true), frame(-1, 0x86dd, echo6Big)},
		{"gre4", spec(encap.GRE, false), frame(-1, 0x0800, tcp4)},
		{"gre6", spec(encap.GRE, true), frame(-1, 0x86dd, tcp6)},
		{"direct", spec(encap.Direct, false), frame(-1, 0x0800, tcp4)},
		{"ipip4-vlan", spec(encap.IPIP, false), frame(frameVLAN, 0x0800, tcp4)},
	}
}

// Encap is repeatable on the same frame: it reads the inner packet and
// Meta only, and rewrites the same bytes in front of it every time.
func BenchmarkEncap(b *testing.B) {
	for _, c := range perfCases() {
		b.Run(c.name, func(b *testing.B) {
			tmpl, err := encap.NewTemplate(c.spec)
			if err != nil {
				b.Fatal(err)
			}
			m, r := packet.Parse(c.in)
			if r != packet.OK {
				b.Fatal(r)
			}
			buf, off, n := chunk(c.in)
			var id uint16
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				id++
				if _, _, res := tmpl.Encap(buf, off, n, &m, testHash, id); res != encap.OK {
					b.Fatal(res)
				}
			}
			reportPerPacket(b, cpu0)
		})
	}
}

func BenchmarkTooBigReply(b *testing.B) {
	for _, c := range []struct {
		name string
		in   []byte
	}{{"v4-1500", frame(-1, 0x0800, big4DF)}, {"v6-1500", frame(-1, 0x86dd, big6)}} {
		b.Run(c.name, func(b *testing.B) {
			m, _ := packet.Parse(c.in)
			buf, off, n := chunk(c.in)
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				copy(buf[off:off+14], c.in) // the reply overwrote the source MAC
				if _, _, res := encap.TooBigReply(buf, off, n, &m, ourMAC, 1480, 7); res != encap.TooBig {
					b.Fatal(res)
				}
			}
			reportPerPacket(b, cpu0)
		})
	}
}

func BenchmarkFragment(b *testing.B) {
	tmpl, err := encap.NewTemplate(spec(encap.GUE, false))
	if err != nil {
		b.Fatal(err)
	}
	in := frame(-1, 0x0800, big4)
	m, _ := packet.Parse(in)
	buf, off, n := chunk(in)
	spare := [][]byte{make([]byte, 2048)}
	sizes := make([]int, 1)
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, _, _, res := tmpl.Fragment(buf, off, n, &m, testHash, 7, spare, sizes); res != encap.OK {
			b.Fatal(res)
		}
	}
	reportPerPacket(b, cpu0)
}

func TestEncapAllocatesNothing(t *testing.T) {
	for _, c := range perfCases() {
		tmpl, err := encap.NewTemplate(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := packet.Parse(c.in)
		buf, off, n := chunk(c.in)
		allocs := testing.AllocsPerRun(100, func() {
			if _, _, res := tmpl.Encap(buf, off, n, &m, testHash, 1); res != encap.OK {
				t.Fatal(res)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: Encap allocates %.1f times per packet", c.name, allocs)
		}
	}
}

func TestSlowPathsAllocateNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		spec encap.Spec
		in   []byte
		want encap.Result
	}{
		{"frag-needed", spec(encap.IPIP, false), frame(-1, 0x0800, big4DF), encap.TooBig},
		{"packet-too-big", spec(encap.GUE, true), frame(frameVLAN, 0x86dd, big6), encap.TooBig},
		{"no-icmp", spec(encap.IPIP, false), frame(-1, 0x0800, bigErr4), encap.DropTooBig},
		{"need-fragments", spec(encap.GRE, false), frame(-1, 0x0800, big4), encap.NeedFragments},
		{"6in4", spec(encap.GRE, false), frame(-1, 0x86dd, tcp6), encap.DropFamily},
	} {
		tmpl, err := encap.NewTemplate(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := packet.Parse(c.in)
		buf, off, n := chunk(c.in)
		allocs := testing.AllocsPerRun(100, func() {
			copy(buf[off:], c.in)
			if _, _, res := tmpl.Encap(buf, off, n, &m, testHash, 1); res != c.want {
				t.Fatal(res)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per packet", c.name, allocs)
		}
	}
	for _, in := range [][]byte{frame(-1, 0x0800, big4DF), frame(frameVLAN, 0x86dd, big6)} {
		m, _ := packet.Parse(in)
		buf, off, n := chunk(in)
		allocs := testing.AllocsPerRun(100, func() {
			copy(buf[off:], in)
			if _, _, res := encap.TooBigReply(buf, off, n, &m, ourMAC, 1400, 1); res != encap.TooBig {
				t.Fatal(res)
			}
		})
		if allocs != 0 {
			t.Errorf("TooBigReply: %.1f allocations per packet", allocs)
		}
	}
	for _, v6 := range []bool{false, true} {
		tmpl, _ := encap.NewTemplate(spec(encap.GUE, v6))
		in := frame(-1, 0x0800, big4)
		m, _ := packet.Parse(in)
		buf, off, n := chunk(in)
		spare := [][]byte{make([]byte, 2048)}
		sizes := make([]int, 1)
		allocs := testing.AllocsPerRun(100, func() {
			if _, _, _, res := tmpl.Fragment(buf, off, n, &m, testHash, 1, spare, sizes); res != encap.OK {
				t.Fatal(res)
			}
		})
		if allocs != 0 {
			t.Errorf("Fragment (v6 outer %v): %.1f allocations per packet", v6, allocs)
		}
	}
}
