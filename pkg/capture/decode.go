package capture

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The listing's decoder: the headers a line shows, outer to inner, and
// only those: Ethernet and VLAN tags, IPv4 and IPv6 (extension headers
// skipped), the encapsulations xlb emits (IPIP, IPv6 in IP, GRE, GUE on
// its default port), TCP, UDP, ICMP and ICMPv6. It was written to print
// what gopacket printed for the frames xlb handles (TestSummaryAgainstGopacket
// decodes the same frames with gopacket); where they part: GUE is decoded
// (gopacket stops at its UDP header), and a UDP port of an application
// gopacket knows (DNS, VXLAN...) does not make its UDP header vanish as
// "(cut)" when the payload is not that application's.

// IP protocol numbers and ether types the decoder follows.
const (
	protoICMP      = 1
	protoIPIP      = 4
	protoTCP       = 6
	protoUDP       = 17
	protoIPv6      = 41
	protoRouting   = 43
	protoFragment  = 44
	protoGRE       = 47
	protoICMPv6    = 58
	protoNoNext    = 59
	protoDestOpts  = 60
	protoHopByHop  = 0
	etherIPv4      = 0x0800
	etherARP       = 0x0806
	etherVLAN      = 0x8100
	etherQinQ      = 0x88a8
	etherIPv6      = 0x86dd
	gueDefaultPort = 6080
)

// summary collects a frame's parts.
type summary struct {
	parts []string
	cut   bool // a header ended before its length: the rest is unknown
}

func (s *summary) add(format string, args ...any) {
	s.parts = append(s.parts, fmt.Sprintf(format, args...))
}

// Summary decodes the frame's headers for a listing, outer to inner:
// "IPv4 198.18.0.2 > 10.0.1.10 | IPv4 198.51.100.7 > 203.0.113.10 | TCP 40000 > 80 [S]".
// A header cut by the snap length ends the line with "(cut)".
func (p *Packet) Summary() string {
	b := p.Data
	if len(b) < 14 {
		return "undecodable frame"
	}
	outer := binary.BigEndian.Uint16(b[12:])
	typ, b := outer, b[14:]
	var s summary
	for typ == etherVLAN || typ == etherQinQ {
		if len(b) < 4 {
			s.cut = true
			break
		}
		typ, b = binary.BigEndian.Uint16(b[2:]), b[4:]
	}
	if !s.cut {
		s.ether(typ, b)
	}
	if len(s.parts) == 0 {
		return "ethertype " + etherName(outer)
	}
	if s.cut {
		s.parts = append(s.parts, "(cut)")
	}
	return strings.Join(s.parts, " | ")
}

func etherName(t uint16) string {
	switch t {
	case etherIPv4:
		return "IPv4"
	case etherIPv6:
		return "IPv6"
	case etherARP:
		return "ARP"
	case etherVLAN:
		return "Dot1Q"
	case etherQinQ:
		return "QinQ"
	}
	return fmt.Sprintf("0x%04x", t)
}

// ether decodes what an ether type (or GRE's protocol) says follows.
func (s *summary) ether(typ uint16, b []byte) {
	switch typ {
	case etherIPv4:
		s.ipv4(b)
	case etherIPv6:
		s.ipv6(b)
	}
}

func (s *summary) ipv4(b []byte) {
	if len(b) < 20 {
		s.cut = true
		return
	}
	hl := int(b[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(b[2:]))
	if hl < 20 || len(b) < hl || total != 0 && total < hl {
		s.cut = len(b) < hl
		return
	}
	if total != 0 && total < len(b) {
		b = b[:total] // the Ethernet padding is not payload
	}
	src, _ := netip.AddrFromSlice(b[12:16])
	dst, _ := netip.AddrFromSlice(b[16:20])
	s.add("IPv4 %s > %s", src, dst)
	if flagsFrag := binary.BigEndian.Uint16(b[6:]); flagsFrag&0x3fff != 0 {
		return // a fragment (the first too): its transport header may be elsewhere
	}
	s.transport(b[9], b[hl:])
}

func (s *summary) ipv6(b []byte) {
	if len(b) < 40 {
		s.cut = true
		return
	}
	src, _ := netip.AddrFromSlice(b[8:24])
	dst, _ := netip.AddrFromSlice(b[24:40])
	s.add("IPv6 %s > %s", src, dst)
	next, b := b[6], b[40:]
	for {
		switch next {
		case protoHopByHop, protoRouting, protoDestOpts:
			if len(b) < 8 || len(b) < (int(b[1])+1)*8 {
				s.cut = true
				return
			}
			next, b = b[0], b[(int(b[1])+1)*8:]
			continue
		case protoFragment, protoNoNext:
			return
		}
		s.transport(next, b)
		return
	}
}

// transport decodes what an IP header's protocol says follows.
func (s *summary) transport(proto byte, b []byte) {
	switch proto {
	case protoTCP:
		if len(b) < 20 || int(b[12]>>4)*4 > len(b) {
			s.cut = true
			return
		}
		s.add("TCP %d > %d [%s]", binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:]), tcpFlags(b[13]))
	case protoUDP:
		if len(b) < 8 {
			s.cut = true
			return
		}
		dport := binary.BigEndian.Uint16(b[2:])
		s.add("UDP %d > %d", binary.BigEndian.Uint16(b), dport)
		if dport == gueDefaultPort && len(b) > 8 {
			// GUE variant 1: the inner IP header right after UDP.
			switch b[8] >> 4 {
			case 4:
				s.ipv4(b[8:])
			case 6:
				s.ipv6(b[8:])
			}
		}
	case protoICMP:
		if len(b) < 8 {
			s.cut = true
			return
		}
		s.parts = append(s.parts, "ICMP "+icmpName(b[0], b[1], icmp4Names))
	case protoICMPv6:
		if len(b) < 4 {
			s.cut = true
			return
		}
		s.parts = append(s.parts, "ICMPv6 "+icmpName(b[0], b[1], icmp6Names))
	case protoIPIP:
		s.ipv4(b)
	case protoIPv6:
		s.ipv6(b)
	case protoGRE:
		s.gre(b)
	}
}

// gre decodes a GRE header (RFC 2784, the key and sequence of RFC 2890)
// and the IP packet it carries.
func (s *summary) gre(b []byte) {
	if len(b) < 4 {
		s.cut = true
		return
	}
	n := 4
	for _, bit := range []byte{0x80, 0x20, 0x10} { // checksum, key, sequence
		if b[0]&bit != 0 {
			n += 4
		}
	}
	if len(b) < n {
		s.cut = true
		return
	}
	s.parts = append(s.parts, "GRE")
	s.ether(binary.BigEndian.Uint16(b[2:]), b[n:])
}

// tcpFlags names the flags a listing shows, as tcpdump's letters.
func tcpFlags(f byte) string {
	var b strings.Builder
	for _, x := range []struct {
		bit byte
		c   byte
	}{{0x02, 'S'}, {0x01, 'F'}, {0x04, 'R'}, {0x08, 'P'}, {0x10, '.'}} {
		if f&x.bit != 0 {
			b.WriteByte(x.c)
		}
	}
	return b.String()
}

// icmpKind names an ICMP type and, when the type has named codes, its
// codes.
type icmpKind struct {
	name  string
	codes map[byte]string
}

// The ICMP messages xlb sends, answers or forwards, named as the listing
// has always named them.
var (
	icmp4Names = map[byte]icmpKind{
		0:  {name: "EchoReply"},
		3:  {"DestinationUnreachable", map[byte]string{0: "Net", 1: "Host", 2: "Protocol", 3: "Port", 4: "FragmentationNeeded", 13: "CommAdminProhibited"}},
		5:  {"Redirect", map[byte]string{0: "Net", 1: "Host"}},
		8:  {name: "EchoRequest"},
		11: {"TimeExceeded", map[byte]string{0: "TTLExceeded", 1: "FragmentReassemblyTimeExceeded"}},
		12: {name: "ParameterProblem"},
	}
	icmp6Names = map[byte]icmpKind{
		1:   {"DestinationUnreachable", map[byte]string{0: "NoRouteToDst", 1: "AdminProhibited", 3: "AddressUnreachable", 4: "PortUnreachable"}},
		2:   {name: "PacketTooBig"},
		3:   {"TimeExceeded", map[byte]string{0: "HopLimitExceeded", 1: "FragmentReassemblyTimeExceeded"}},
		128: {name: "EchoRequest"},
		129: {name: "EchoReply"},
		133: {name: "RouterSolicitation"},
		134: {name: "RouterAdvertisement"},
		135: {name: "NeighborSolicitation"},
		136: {name: "NeighborAdvertisement"},
	}
)

// icmpName is "EchoRequest", "DestinationUnreachable(FragmentationNeeded)",
// "TimeExceeded(Code: 7)" for a code without a name, "42(0)" for a type
// without one.
func icmpName(typ, code byte, names map[byte]icmpKind) string {
	k, ok := names[typ]
	switch {
	case !ok:
		return strconv.Itoa(int(typ)) + "(" + strconv.Itoa(int(code)) + ")"
	case k.codes == nil && code == 0:
		return k.name
	case k.codes[code] != "":
		return k.name + "(" + k.codes[code] + ")"
	}
	return k.name + "(Code: " + strconv.Itoa(int(code)) + ")"
}
