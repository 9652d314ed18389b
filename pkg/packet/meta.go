package packet

// Family is the IP version of a parsed packet.
type Family uint8

const (
	FamilyNone Family = 0
	IPv4       Family = 4
	IPv6       Family = 6
)

// IP protocol numbers the parser knows by name.
const (
	ProtoICMP   uint8 = 1
	ProtoIPIP   uint8 = 4
	ProtoTCP    uint8 = 6
	ProtoUDP    uint8 = 17
	ProtoIPv6   uint8 = 41
	ProtoGRE    uint8 = 47
	ProtoESP    uint8 = 50
	ProtoICMPv6 uint8 = 58
)

// TCP flag bits as they appear in byte 13 of the TCP header.
const (
	TCPFlagFIN uint8 = 1 << 0
	TCPFlagSYN uint8 = 1 << 1
	TCPFlagRST uint8 = 1 << 2
	TCPFlagPSH uint8 = 1 << 3
	TCPFlagACK uint8 = 1 << 4
	TCPFlagURG uint8 = 1 << 5
	TCPFlagECE uint8 = 1 << 6
	TCPFlagCWR uint8 = 1 << 7
)

// FragState says whether a packet is an IP fragment and which kind.
type FragState uint8

const (
	// FragNone: not a fragment (IPv6 atomic fragments, RFC 8021, count as FragNone).
	FragNone FragState = iota
	// FragFirst: offset 0 with more fragments to follow; carries the L4 header.
	FragFirst
	// FragNonFirst: offset > 0; carries no L4 header, so no ports.
	FragNonFirst
)

// Tuple is the flow a packet belongs to, with IPv4 addresses mapped into
// IPv6 (::ffff:a.b.c.d) so both families share one fixed layout.
type Tuple struct {
	Src, Dst         [16]byte
	SrcPort, DstPort uint16 // zero when the protocol has no ports or the packet is a non-first fragment
	Proto            uint8  // transport protocol after any IPv6 extension headers
}

// Meta is what Parse learns about one frame. It holds no references into
// the frame, so it can be copied and kept freely; offsets index the frame.
type Meta struct {
	Tuple

	Family  Family
	L3Off   uint16 // offset of the IPv4/IPv6 header
	L4Off   uint16 // offset of the transport header (or of the fragment payload for non-first fragments)
	L3End   uint16 // offset one past the IP packet (L3Off + total length); later bytes are L2 padding
	VLANTCI uint16 // 802.1Q tag control information; valid when HasVLAN
	HasVLAN bool

	TOS       uint8 // IPv4 TOS / IPv6 traffic class (DSCP << 2 | ECN)
	TTL       uint8 // IPv4 TTL / IPv6 hop limit
	DF        bool  // IPv4 don't-fragment bit
	IPOptions bool  // IPv4 header carries options (IHL > 5); they were skipped, not interpreted

	TCPFlags uint8 // TCPFlag* bits; valid when Proto == ProtoTCP and Frag != FragNonFirst

	Frag   FragState
	FragID uint32 // IPv4 identification or IPv6 fragment identification; valid when Frag != FragNone

	// ICMP and ICMPv6 (valid when Proto is ProtoICMP / ProtoICMPv6 and Frag != FragNonFirst).
	ICMPType, ICMPCode uint8
	ICMPEchoID         uint16 // identifier of echo request/reply
	ICMPMTU            uint32 // next-hop MTU of IPv4 fragmentation-needed or IPv6 packet-too-big

	// Inner is the flow quoted by an ICMP/ICMPv6 error message (destination
	// unreachable, packet too big, time exceeded, parameter problem), exactly
	// as quoted. The quoted packet is usually a backend's reply (Src = VIP,
	// Dst = client); reversing it to find the client's flow is the caller's
	// job. Valid when HasInner.
	Inner    Tuple
	InnerOff uint16 // offset of the quoted IP header
	HasInner bool
}

// IsICMPError reports whether m is an ICMP or ICMPv6 error message that
// quotes a flow.
func (m *Meta) IsICMPError() bool { return m.HasInner }
