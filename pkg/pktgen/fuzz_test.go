package pktgen

import (
	"net/netip"
	"testing"

	"github.com/xlbnet/xlb/pkg/packet"
)

// FuzzGenerator: for any ranges, protocol, size and flow setting the
// generator accepts, every frame parses, carries checksums that verify
// from scratch, and stays inside its ranges; anything it refuses is
// refused with an error, never a panic.
func FuzzGenerator(f *testing.F) {
	f.Add(false, uint32(0xc6120001), uint32(0), uint32(0xc6120000+42), uint32(0), uint16(9), uint16(100), uint16(9), uint16(0), uint8(0), uint16(60), uint16(0), uint8(0), true, uint64(1))
	f.Add(false, uint32(0xc6130000), uint32(0xffff), uint32(0xcb00710a), uint32(0), uint16(1024), uint16(0), uint16(80), uint16(0), uint8(1), uint16(60), uint16(1000), uint8(3), false, uint64(2))
	f.Add(true, uint32(1), uint32(0xfffffff), uint32(0x10), uint32(2), uint16(1), uint16(65534), uint16(80), uint16(1), uint8(2), uint16(1500), uint16(7), uint8(1), false, uint64(3))
	f.Add(true, uint32(0), uint32(0), uint32(0), uint32(0), uint16(1), uint16(0), uint16(1), uint16(0), uint8(0), uint16(61), uint16(0), uint8(0), false, uint64(4))
	f.Fuzz(func(t *testing.T, v6 bool, src, srcN, dst, dstN uint32, sp, spN, dp, dpN uint16, proto uint8, size, flows uint16, flowLen uint8, csum bool, seed uint64) {
		addr := func(v uint32) netip.Addr {
			if v6 {
				b := [16]byte{0xfd, 0, 0x51}
				b[12], b[13], b[14], b[15] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
				return netip.AddrFrom16(b)
			}
			return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		}
		last := func(first, n uint32) uint32 { return first + min(n, ^first) }
		p := Packet{
			SrcMAC: srcMAC, DstMAC: dstMAC,
			Src:      AddrRange{addr(src), addr(last(src, srcN))},
			Dst:      AddrRange{addr(dst), addr(last(dst, dstN))},
			SrcPorts: PortRange{sp, sp + min(spN, ^sp)},
			DstPorts: PortRange{dp, dp + min(dpN, ^dp)},
			Proto:    Proto(proto % 4), Size: int(size % 5000), Flows: int(flows), FlowLen: int(flowLen), UDPChecksum: csum, Seed: seed,
		}
		g, err := NewGenerator(p)
		if err != nil {
			return // refused: a zero port, protocol 3, size above MaxSize…
		}
		frame := append([]byte(nil), g.Template()...)
		q := p.withDefaults()
		for i := range 64 {
			if i > 0 {
				g.Next(frame)
			}
			m := verify(t, frame, p)
			s, d := netip.AddrFrom16(m.Src).Unmap(), netip.AddrFrom16(m.Dst).Unmap()
			if s.Less(q.Src.First) || q.Src.Last.Less(s) || d.Less(q.Dst.First) || q.Dst.Last.Less(d) ||
				m.SrcPort < q.SrcPorts.Min || m.SrcPort > q.SrcPorts.Max || m.DstPort < q.DstPorts.Min || m.DstPort > q.DstPorts.Max {
				t.Fatalf("packet %d: %s:%d → %s:%d outside %s:%s → %s:%s", i, s, m.SrcPort, d, m.DstPort, q.Src, q.SrcPorts, q.Dst, q.DstPorts)
			}
			if len(frame) != max(q.Size, MinSize(q.V6(), q.Proto)) || int(m.L3End) != len(frame) {
				t.Fatalf("packet %d: %d bytes, IP ends at %d, want size %d", i, len(frame), m.L3End, q.Size)
			}
			if want := map[Proto]uint8{UDP: packet.ProtoUDP, TCPSYN: packet.ProtoTCP, TCPACK: packet.ProtoTCP}[q.Proto]; m.Proto != want {
				t.Fatalf("protocol %d for %v", m.Proto, q.Proto)
			}
		}
	})
}
