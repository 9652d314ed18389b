package pktgen

import (
	"encoding/binary"
	"math/bits"

	"github.com/xlbnet/xlb/pkg/packet"
)

// Generator writes frames: a template built once, and per packet the
// fields that vary (addresses, ports) with checksums finished from
// partial sums precomputed over everything that does not vary. One
// goroutine owns a Generator.
type Generator struct {
	tmpl []byte
	v6   bool
	csum bool // write the L4 checksum (false: IPv4 UDP without UDPChecksum)
	udp  bool

	// Offsets in the frame. For IPv6 the address offsets point at the
	// low 8 bytes, the only ones that vary.
	srcOff, dstOff     int
	sportOff, dportOff int
	ipSumOff, l4SumOff int

	// Unfolded ones' complement sums of the IPv4 header and of the L4
	// checksum's coverage (pseudo-header included) with the varying
	// fields and the checksum fields taken as zero.
	ipBase, l4Base uint64

	srcFirst, dstFirst     uint64
	srcSpan, dstSpan       uint64
	sportFirst, dportFirst uint64
	sportSpan, dportSpan   uint64

	// Flows: the current tuple as an odometer over the four ranges.
	flows, flowLen   uint64
	flow, inFlow     uint64
	src, sp, dst, dp uint64
	rng              uint64
}

// NewGenerator builds the template for p (after validation and defaults).
func NewGenerator(p Packet) (*Generator, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	g := &Generator{
		tmpl: make([]byte, p.Size), v6: p.V6(), udp: p.Proto == UDP,
		srcFirst: low64(p.Src.First), dstFirst: low64(p.Dst.First),
		srcSpan: p.Src.span(), dstSpan: p.Dst.span(),
		sportFirst: uint64(p.SrcPorts.Min), dportFirst: uint64(p.DstPorts.Min),
		sportSpan: p.SrcPorts.span(), dportSpan: p.DstPorts.span(),
		flows: uint64(p.Flows), flowLen: uint64(p.FlowLen),
		rng: p.Seed*0x9e3779b97f4a7c15 + 0x2545f4914f6cdd1d,
	}
	b := g.tmpl
	copy(b[0:6], p.DstMAC)
	copy(b[6:12], p.SrcMAC)
	l3 := ethLen
	var l4 int
	proto := uint8(packet.ProtoUDP)
	if p.Proto != UDP {
		proto = packet.ProtoTCP
	}
	l4Len := p.Size - ethLen - ipv4Len
	if g.v6 {
		binary.BigEndian.PutUint16(b[12:], 0x86dd)
		l4 = l3 + ipv6Len
		l4Len = p.Size - l4
		b[l3] = 0x60
		binary.BigEndian.PutUint16(b[l3+4:], uint16(l4Len))
		b[l3+6] = proto
		b[l3+7] = 64
		src, dst := p.Src.First.As16(), p.Dst.First.As16()
		copy(b[l3+8:], src[:8]) // high halves fixed; low halves written per packet
		copy(b[l3+24:], dst[:8])
		g.srcOff, g.dstOff = l3+16, l3+32
	} else {
		binary.BigEndian.PutUint16(b[12:], 0x0800)
		l4 = l3 + ipv4Len
		b[l3] = 0x45
		binary.BigEndian.PutUint16(b[l3+2:], uint16(p.Size-ethLen))
		b[l3+6] = 0x40 // DF
		b[l3+8] = 64
		b[l3+9] = proto
		g.srcOff, g.dstOff, g.ipSumOff = l3+12, l3+16, l3+10
		g.ipBase = sum(b[l3 : l3+ipv4Len])
	}
	g.sportOff, g.dportOff = l4, l4+2
	if p.Proto == UDP {
		binary.BigEndian.PutUint16(b[l4+4:], uint16(l4Len))
		g.l4SumOff = l4 + 6
		g.csum = g.v6 || p.UDPChecksum
	} else {
		binary.BigEndian.PutUint32(b[l4+4:], 0x5eed0001) // sequence number
		b[l4+12] = 5 << 4                                // data offset: no options
		if p.Proto == TCPSYN {
			b[l4+13] = 0x02
		} else {
			b[l4+13] = 0x10
			binary.BigEndian.PutUint32(b[l4+8:], 0x5eed0002) // acknowledgment number
		}
		binary.BigEndian.PutUint16(b[l4+14:], 65535) // window
		g.l4SumOff = l4 + 16
		g.csum = true
	}
	// Pseudo-header without the addresses (the fixed IPv6 halves are
	// added back), plus the whole L4 header and payload with zero ports.
	g.l4Base = uint64(proto) + uint64(l4Len) + sum(b[l4:])
	if g.v6 {
		g.l4Base += sum(b[l3+8:l3+16]) + sum(b[l3+24:l3+32])
	}
	// The template itself carries the first tuple, so a frame written
	// only from it is a valid packet.
	g.write(b, 0, 0, 0, 0)
	return g, nil
}

// Size is the frame length without FCS.
func (g *Generator) Size() int { return len(g.tmpl) }

// Template returns the frame every chunk is initialised with; Next
// rewrites only the varying fields and checksums on top of it.
func (g *Generator) Template() []byte { return g.tmpl }

// sum returns the unfolded big-endian 16-bit word sum of b (even length).
func sum(b []byte) uint64 {
	var s uint64
	for ; len(b) >= 2; b = b[2:] {
		s += uint64(binary.BigEndian.Uint16(b))
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

func fold(s uint64) uint16 {
	for s>>16 != 0 {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// words adds the four 16-bit words of v.
func words(v uint64) uint64 {
	return v>>48 + v>>32&0xffff + v>>16&0xffff + v&0xffff
}

// pick maps a random 64-bit value onto [0, n) without division.
func pick(r, n uint64) uint64 {
	hi, _ := bits.Mul64(r, n)
	return hi
}

// next64 is splitmix64: fast, and good enough to spread flows.
func (g *Generator) next64() uint64 {
	g.rng += 0x9e3779b97f4a7c15
	z := g.rng
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Next writes the next packet's varying fields into frame, which holds the
// template (or any earlier packet of this generator).
func (g *Generator) Next(frame []byte) {
	if g.flows == 0 {
		var s, sp, d, dp uint64
		if g.srcSpan > 1 {
			s = pick(g.next64(), g.srcSpan)
		}
		if g.sportSpan > 1 {
			sp = pick(g.next64(), g.sportSpan)
		}
		if g.dstSpan > 1 {
			d = pick(g.next64(), g.dstSpan)
		}
		if g.dportSpan > 1 {
			dp = pick(g.next64(), g.dportSpan)
		}
		g.write(frame, s, sp, d, dp)
		return
	}
	g.write(frame, g.src, g.sp, g.dst, g.dp)
	if g.inFlow++; g.inFlow < g.flowLen {
		return
	}
	g.inFlow = 0
	if g.flow++; g.flow == g.flows {
		g.flow, g.src, g.sp, g.dst, g.dp = 0, 0, 0, 0, 0
		return
	}
	// Advance the odometer: source address fastest, then source port,
	// destination address, destination port.
	if g.src++; g.src < g.srcSpan {
		return
	}
	g.src = 0
	if g.sp++; g.sp < g.sportSpan {
		return
	}
	g.sp = 0
	if g.dst++; g.dst < g.dstSpan {
		return
	}
	g.dst = 0
	if g.dp++; g.dp == g.dportSpan {
		g.dp = 0
	}
}

// write stores the tuple with the given offsets into each range and the
// checksums that follow.
func (g *Generator) write(b []byte, s, sp, d, dp uint64) {
	src, dst := g.srcFirst+s, g.dstFirst+d
	sport, dport := g.sportFirst+sp, g.dportFirst+dp
	_ = b[len(g.tmpl)-1]
	binary.BigEndian.PutUint16(b[g.sportOff:], uint16(sport))
	binary.BigEndian.PutUint16(b[g.dportOff:], uint16(dport))
	addrs := words(src) + words(dst)
	if g.v6 {
		binary.BigEndian.PutUint64(b[g.srcOff:], src)
		binary.BigEndian.PutUint64(b[g.dstOff:], dst)
	} else {
		binary.BigEndian.PutUint32(b[g.srcOff:], uint32(src))
		binary.BigEndian.PutUint32(b[g.dstOff:], uint32(dst))
		binary.BigEndian.PutUint16(b[g.ipSumOff:], ^fold(g.ipBase+addrs))
	}
	if !g.csum {
		return
	}
	c := ^fold(g.l4Base + addrs + sport + dport)
	if c == 0 && g.udp {
		c = 0xffff // UDP: 0 means "no checksum"
	}
	binary.BigEndian.PutUint16(b[g.l4SumOff:], c)
}
