package encap

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/xlbnet/xlb/pkg/packet"
)

// Defaults applied by NewTemplate to zero Spec fields.
const (
	DefaultGUEPort = 6080
	DefaultMTU     = 1500
	// DefaultTTL is the outer TTL / hop limit, and the TTL of ICMP errors
	// we originate (as Katran's DEFAULT_TTL).
	DefaultTTL = 64
)

// MTU bounds checked by NewTemplate.
const (
	// MinMTUIPv4 is the smallest egress MTU for an IPv4 outer header: every
	// IPv4 host must accept 576-byte datagrams (RFC 791), and the inner
	// packets we quote in ICMP errors fit below it.
	MinMTUIPv4 = 576
	// MinInnerMTUIPv6 is the IPv6 minimum link MTU (RFC 8200 §5): a tunnel
	// with an IPv6 outer header must pass 1280-byte inner packets without
	// asking for less, so its MTU is at least 1280 + overhead.
	MinInnerMTUIPv6 = 1280
	// MaxMTU is the largest MTU an IPv4/IPv6 length field can describe.
	MaxMTU = 65535
)

// Spec describes one backend's encapsulation.
type Spec struct {
	Kind Kind
	// SrcMAC is our interface's MAC address.
	SrcMAC [6]byte
	// DstMAC is the next hop's MAC (the backend's own MAC for Direct).
	DstMAC [6]byte
	// Src is our address on the egress interface (outer source); Dst is the
	// backend (outer destination). Same family. Ignored for Direct.
	Src, Dst netip.Addr
	// Inner is the family of the packets the template will carry (the
	// rule's VIP family); FamilyNone accepts every family the outer header
	// can carry. Used to reject 6in4 at configuration time.
	Inner packet.Family
	// GUEPort is the UDP destination port of GUE (0: DefaultGUEPort).
	GUEPort uint16
	// MTU is the egress L3 MTU (0: DefaultMTU): the largest IP packet,
	// outer header included, that may leave the interface.
	MTU int
}

// Template is the precomputed outer header of one backend. It is
// immutable after NewTemplate, so any number of workers may use it at
// once (it is published inside the dataplane snapshot).
type Template struct {
	spec     Spec
	kind     Kind
	outer    packet.Family // FamilyNone for Direct
	overhead int           // outer IP + UDP/GRE bytes
	ipLen    int           // outer IP header bytes (20 or 40; 0 for Direct)
	mtu      int
	macs     [12]byte // destination then source MAC, as on the wire
	// hdr is the outer IP header followed by the UDP or GRE header, with
	// every per-packet field zero: TOS/traffic class, lengths, ID, flags,
	// checksums, GUE source port, IPIP/GRE inner protocol.
	hdr [ipv6HeaderSize + udpHeaderSize]byte
	// v4Sum is the unfolded sum of the constant IPv4 header words (TTL and
	// protocol, addresses); per packet the varying words are added.
	v4Sum uint32
	// v6Pseudo is the folded sum of the constant part of the UDP/IPv6
	// pseudo-header (addresses, next header) plus the destination port.
	v6Pseudo uint16
}

// NewTemplate validates s and precomputes the outer headers.
func NewTemplate(s Spec) (*Template, error) {
	if s.Kind < IPIP || s.Kind > Direct {
		return nil, fmt.Errorf("encap template: unknown kind %d", s.Kind)
	}
	if s.GUEPort == 0 {
		s.GUEPort = DefaultGUEPort
	}
	if s.MTU == 0 {
		s.MTU = DefaultMTU
	}
	if s.SrcMAC == ([6]byte{}) {
		return nil, fmt.Errorf("encap template %s: source MAC is zero", s.Kind)
	}
	if s.DstMAC == ([6]byte{}) {
		return nil, fmt.Errorf("encap template %s: destination MAC is zero", s.Kind)
	}
	if s.Inner != packet.FamilyNone && s.Inner != packet.IPv4 && s.Inner != packet.IPv6 {
		return nil, fmt.Errorf("encap template %s: unknown inner family %d", s.Kind, s.Inner)
	}
	t := &Template{spec: s, kind: s.Kind, mtu: s.MTU}
	copy(t.macs[0:6], s.DstMAC[:])
	copy(t.macs[6:12], s.SrcMAC[:])
	if s.Kind == Direct {
		if s.MTU < MinMTUIPv4 || s.MTU > MaxMTU {
			return nil, fmt.Errorf("encap template DIRECT: mtu %d outside %d..%d", s.MTU, MinMTUIPv4, MaxMTU)
		}
		return t, nil
	}

	src, dst := s.Src.Unmap(), s.Dst.Unmap()
	if !src.IsValid() || !dst.IsValid() {
		return nil, fmt.Errorf("encap template %s: source and backend addresses are required", s.Kind)
	}
	if src.Is4() != dst.Is4() {
		return nil, fmt.Errorf("encap template %s: source %s and backend %s are of different families", s.Kind, src, dst)
	}
	for _, a := range [2]netip.Addr{src, dst} {
		if a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return nil, fmt.Errorf("encap template %s: %s is not a unicast address", s.Kind, a)
		}
	}
	outerV6 := dst.Is6()
	if !outerV6 && s.Inner == packet.IPv6 {
		return nil, fmt.Errorf("encap template %s: IPv6 inside IPv4 is not supported (backend %s needs an IPv6 address)", s.Kind, dst)
	}
	t.overhead = Overhead(s.Kind, outerV6)
	minMTU := MinMTUIPv4
	if outerV6 {
		minMTU = MinInnerMTUIPv6 + t.overhead
	}
	if s.MTU < minMTU || s.MTU > MaxMTU {
		return nil, fmt.Errorf("encap template %s to %s: mtu %d outside %d..%d", s.Kind, dst, s.MTU, minMTU, MaxMTU)
	}

	var proto uint8
	switch s.Kind {
	case IPIP:
		proto = packet.ProtoIPIP // IPv6 outer: rewritten per packet (4 or 41)
	case GUE:
		proto = packet.ProtoUDP
	case GRE:
		proto = packet.ProtoGRE
	}
	ipLen := ipv4HeaderSize
	if outerV6 {
		t.outer = packet.IPv6
		ipLen = ipv6HeaderSize
		h := packet.IPv6Header(t.hdr[:])
		h.SetVersionTCFlow(0, 0)
		h.SetNextHeader(proto)
		h.SetHopLimit(DefaultTTL)
		h.SetSourceAddress(src.As16())
		h.SetDestinationAddress(dst.As16())
	} else {
		t.outer = packet.IPv4
		h := packet.IPv4Header(t.hdr[:])
		h.SetVersionIHL(ipv4HeaderSize)
		h.SetTTL(DefaultTTL)
		h.SetProtocol(proto)
		h.SetSourceAddress(src.As4())
		h.SetDestinationAddress(dst.As4())
		// Words 4..9 (TTL/protocol, checksum = 0, addresses).
		for i := packet.IPv4TTLOffset; i < ipv4HeaderSize; i += 2 {
			t.v4Sum += uint32(binary.BigEndian.Uint16(t.hdr[i:]))
		}
	}
	switch s.Kind {
	case GUE:
		u := packet.UDPHeader(t.hdr[ipLen:])
		u.SetDestinationPort(s.GUEPort)
		if outerV6 {
			a16, b16 := src.As16(), dst.As16()
			ps := packet.Checksum(a16[:], 0)
			ps = packet.Checksum(b16[:], ps)
			ps = packet.ChecksumCombine(ps, uint16(packet.ProtoUDP))
			t.v6Pseudo = packet.ChecksumCombine(ps, s.GUEPort)
		}
	case GRE:
		packet.GREHeader(t.hdr[ipLen:]).SetFlagsVersion(0)
	}
	t.ipLen = ipLen
	return t, nil
}

// Kind returns the template's encapsulation.
func (t *Template) Kind() Kind { return t.kind }

// Spec returns the Spec the template was built from, defaults filled in.
func (t *Template) Spec() Spec { return t.spec }

// Overhead returns the bytes the template adds in front of the IP packet
// (outer IP + UDP/GRE; 0 for Direct), not counting Ethernet.
func (t *Template) Overhead() int { return t.overhead }

// MTU returns the egress MTU the template checks against.
func (t *Template) MTU() int { return t.mtu }

// InnerMTU returns the largest inner IP packet that fits without
// fragmentation: the MTU reported in ICMP errors.
func (t *Template) InnerMTU() int { return t.mtu - t.overhead }

// Outer returns the family of the outer header (FamilyNone for Direct).
func (t *Template) Outer() packet.Family { return t.outer }

// UsesFlowHash reports whether Encap and Fragment read their flowHash: GUE
// (the UDP source port) and an IPv6 outer header (the flow label, the
// fragment identification). For the others any value gives the same
// bytes, so a caller may pass 0 and skip computing the hash.
func (t *Template) UsesFlowHash() bool { return t.kind == GUE || t.outer == packet.IPv6 }
