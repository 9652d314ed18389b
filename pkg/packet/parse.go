package packet

import "encoding/binary"

// MaxFrameSize is the longest frame Parse accepts: Meta's offsets are uint16.
const MaxFrameSize = 0xffff

// Parse reads the headers of one Ethernet frame and returns what it learned.
// Meta is meaningful only when the Result is OK; for other results it is
// partly filled and must be ignored. Parse never reads past len(frame),
// never panics, never allocates and keeps no reference to frame.
//
// When the Result is OK:
//
//	L3Off < L4Off <= L3End <= len(frame)
//
// L3Off is 14 or 18 (VLAN); L4Off is the first byte after the IPv4 header
// (options included) or after the IPv6 extension headers, that is the
// transport header, or the fragment payload of a non-first fragment;
// L3End is one past the IP packet and bytes from L3End on are L2 padding.
// For TCP, UDP, ICMP, ICMPv6, ESP and GRE in an unfragmented packet or a
// first fragment, the minimum transport header lies within [L4Off, L3End).
func Parse(frame []byte) (m Meta, r Result) {
	r = ParseInto(frame, &m)
	return m, r
}

// ParseInto is Parse writing into *m, which it clears first: the packet
// path's form, so a worker parses a batch into its own array of Meta
// without copying one per packet.
func ParseInto(frame []byte, m *Meta) Result {
	*m = Meta{}
	if len(frame) > MaxFrameSize {
		return DropFrameTooLong
	}
	if len(frame) < EthernetMinimumSize {
		return DropTruncatedL2
	}
	off := EthernetMinimumSize
	et := be16(frame[EthTypeOffset:])
	switch et {
	case EtherTypeVLAN:
		if len(frame) < EthernetMinimumSize+VLANSize {
			return DropTruncatedL2
		}
		m.VLANTCI = be16(frame[off+VLANTCIOffset:])
		m.HasVLAN = true
		et = be16(frame[off+VLANTypeOffset:])
		off += VLANSize
		if et == EtherTypeVLAN || et == EtherTypeQinQ || et == EtherTypeQinQ1 {
			return PassUnsupportedL2
		}
	case EtherTypeQinQ, EtherTypeQinQ1:
		return PassUnsupportedL2
	}
	switch et {
	case EtherTypeIPv4:
		return parseIPv4(frame, off, m)
	case EtherTypeIPv6:
		return parseIPv6(frame, off, m)
	}
	return PassNonIP
}

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }

// mapIPv4 writes the IPv4 address a[:4] as ::ffff:a.b.c.d.
func mapIPv4(dst *[16]byte, a []byte) {
	dst[10], dst[11] = 0xff, 0xff
	copy(dst[12:], a[:4])
}

func parseIPv4(frame []byte, off int, m *Meta) Result {
	b := frame[off:]
	if len(b) < IPv4MinimumSize {
		return DropTruncatedL3
	}
	vihl := b[IPv4VersionIHLOffset]
	if vihl>>4 != 4 {
		return DropBadIPVersion
	}
	hl := int(vihl&0x0f) * 4
	if hl < IPv4MinimumSize {
		return DropIPv4IHLTooSmall
	}
	if hl > len(b) {
		return DropIPv4IHLBeyondFrame
	}
	tl := int(be16(b[IPv4TotalLenOffset:]))
	if tl < hl {
		return DropIPv4TotalLengthTooSmall
	}
	if tl > len(b) {
		return DropIPv4TotalLengthBeyondFrame
	}
	// Verified, not trusted blindly: 20 bytes cost a few adds, and a
	// corrupted header must not pick a backend (see doc.go).
	if hl == IPv4MinimumSize {
		if !ipv4HeaderSum20OK(b) {
			return DropIPv4BadChecksum
		}
	} else if Checksum(b[:hl], 0) != 0xffff {
		return DropIPv4BadChecksum
	}
	m.Family = IPv4
	m.L3Off = uint16(off)
	m.L3End = uint16(off + tl)
	m.L4Off = uint16(off + hl)
	m.TOS = b[IPv4TOSOffset]
	m.TTL = b[IPv4TTLOffset]
	m.Proto = b[IPv4ProtocolOffset]
	m.IPOptions = hl > IPv4MinimumSize
	mapIPv4(&m.Src, b[IPv4SrcAddrOffset:])
	mapIPv4(&m.Dst, b[IPv4DstAddrOffset:])
	ff := be16(b[IPv4FlagsFragOffset:])
	m.DF = ff&IPv4FlagDF != 0
	short := DropTruncatedL4
	if ff&(IPv4FlagMF|IPv4FragOffsetMask) != 0 {
		fo := int(ff&IPv4FragOffsetMask) * 8
		m.FragID = uint32(be16(b[IPv4IDOffset:]))
		if fo+tl-hl > 0xffff {
			return DropFragmentOverflow
		}
		if fo != 0 {
			m.Frag = FragNonFirst
			if fo == 8 && m.Proto == ProtoTCP {
				return DropFragmentTiny
			}
			return OK
		}
		m.Frag = FragFirst
		short = DropFragmentTiny
	}
	return parseL4(frame[:off+tl], off+hl, m, short)
}

func parseIPv6(frame []byte, off int, m *Meta) Result {
	b := frame[off:]
	if len(b) < IPv6MinimumSize {
		return DropTruncatedL3
	}
	if b[0]>>4 != 6 {
		return DropBadIPVersion
	}
	end := off + IPv6MinimumSize + int(be16(b[IPv6PayloadLenOffset:]))
	if end > len(frame) {
		return DropIPv6PayloadLengthBeyondFrame
	}
	m.Family = IPv6
	m.L3Off = uint16(off)
	m.L3End = uint16(end)
	m.TOS = b[0]<<4 | b[1]>>4
	m.TTL = b[IPv6HopLimitOffset]
	m.Src = [16]byte(b[IPv6SrcAddrOffset:])
	m.Dst = [16]byte(b[IPv6DstAddrOffset:])
	pkt := frame[:end]
	nh := b[IPv6NextHeaderOffset]
	if !isIPv6Ext[nh] {
		// Fast path: no extension headers, the common case.
		m.Proto = nh
		m.L4Off = uint16(off + IPv6MinimumSize)
		return parseL4(pkt, off+IPv6MinimumSize, m, DropTruncatedL4)
	}
	w, r := walkIPv6(pkt, off+IPv6MinimumSize, nh)
	if r != OK {
		return r
	}
	m.Proto = w.proto
	m.L4Off = uint16(w.off)
	m.Frag = w.frag
	short := DropTruncatedL4
	if w.frag != FragNone {
		m.FragID = w.id
		// The fragmentable part starts after the fragment header.
		if w.fragOffset+end-(w.fragHdr+IPv6FragmentSize) > 0xffff {
			return DropFragmentOverflow
		}
		if w.frag == FragNonFirst {
			if w.fragOffset == 8 && w.proto == ProtoTCP {
				return DropFragmentTiny
			}
			return OK
		}
		short = DropIPv6FragmentChainIncomplete
	}
	return parseL4(pkt, w.off, m, short)
}

// isIPv6Ext tells which next-header values walkIPv6 treats as extension
// headers; everything else ends the chain as the upper-layer protocol.
var isIPv6Ext = [256]bool{
	IPv6ExtHopByHop: true, IPv6ExtRouting: true, IPv6ExtFragment: true,
	IPv6ExtAH: true, IPv6ExtDestination: true, IPv6ExtMobility: true,
	IPv6ExtHIP: true, IPv6ExtShim6: true,
}

// ipv4HeaderSum20OK verifies the checksum of an option-less 20-byte IPv4
// header, nearly every packet, as five 32-bit words; it is small enough to
// be inlined.
func ipv4HeaderSum20OK(b []byte) bool {
	_ = b[19] // bounds check hint
	s := uint64(binary.BigEndian.Uint32(b[0:])) + uint64(binary.BigEndian.Uint32(b[4:])) +
		uint64(binary.BigEndian.Uint32(b[8:])) + uint64(binary.BigEndian.Uint32(b[12:])) +
		uint64(binary.BigEndian.Uint32(b[16:]))
	// s < 2^35: three folds bring it to 16 bits with every carry added back.
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return s == 0xffff
}

// ipv6Walk is where an IPv6 extension-header walk ended.
type ipv6Walk struct {
	off        int    // transport header, or fragment payload of a non-first fragment
	fragHdr    int    // offset of the fragment header (valid when frag != FragNone)
	fragOffset int    // fragment offset in bytes
	id         uint32 // fragment identification
	proto      uint8  // upper-layer protocol (for a non-first fragment: the fragment header's next header)
	frag       FragState
}

// walkIPv6 follows the extension-header chain of the IPv6 packet pkt (which
// ends at the packet's end) from offset off, where a header of type nh
// starts. It stops at the first header that is not an extension header, or
// after the fragment header of a non-first fragment.
func walkIPv6(pkt []byte, off int, nh uint8) (w ipv6Walk, r Result) {
	start := off
	truncated := DropIPv6ExtHeaderTruncated
	for n := 0; ; n++ {
		if !isIPv6Ext[nh] {
			w.proto, w.off = nh, off
			return w, OK
		}
		if n == MaxIPv6ExtHeaders {
			return w, DropIPv6ExtChainTooLong
		}
		if nh == IPv6ExtHopByHop && n != 0 {
			return w, DropIPv6HopByHopMisplaced
		}
		if off+IPv6ExtMinimumSize > len(pkt) {
			return w, truncated
		}
		h := pkt[off : off+IPv6ExtMinimumSize]
		hl := IPv6FragmentSize
		if nh != IPv6ExtFragment {
			hl = IPv6ExtHeader(h).Length(nh)
		}
		if off+hl-start > MaxIPv6ExtBytes {
			return w, DropIPv6ExtChainTooLong
		}
		if off+hl > len(pkt) {
			return w, truncated
		}
		if nh != IPv6ExtFragment {
			nh = h[IPv6ExtNextHeaderOffset]
			off += hl
			continue
		}
		if w.frag != FragNone || w.fragHdr != 0 {
			return w, DropIPv6FragmentRepeated
		}
		f := IPv6FragmentHeader(h)
		w.fragHdr = off
		nh = f.NextHeader()
		off += IPv6FragmentSize
		fo, more := f.FragmentOffset(), f.MoreFragments()
		switch {
		case fo != 0:
			w.frag, w.fragOffset, w.id = FragNonFirst, fo, f.ID()
			w.proto, w.off = nh, off
			return w, OK
		case more:
			w.frag, w.id = FragFirst, f.ID()
			// RFC 7112: the rest of the chain must be in this fragment.
			truncated = DropIPv6FragmentChainIncomplete
		}
		// Otherwise an atomic fragment (RFC 8021): not a fragment at all.
	}
}

// parseL4 reads the transport header at pkt[off:], where pkt ends at the
// IP packet's end. short is the result for a header that does not fit.
func parseL4(pkt []byte, off int, m *Meta, short Result) Result {
	p := pkt[off:]
	switch m.Proto {
	case ProtoTCP:
		if len(p) < TCPMinimumSize {
			return short
		}
		doff := int(p[TCPDataOffsetOffset]>>4) * 4
		if doff < TCPMinimumSize {
			return DropBadTCPDataOffset
		}
		if doff > len(p) {
			if m.Frag == FragFirst {
				return short
			}
			return DropBadTCPDataOffset
		}
		flags := p[TCPFlagsOffset]
		if !IsValidTCPFlags(flags) {
			return DropBadTCPFlags
		}
		m.TCPFlags = flags
		m.SrcPort = be16(p[TCPSrcPortOffset:])
		m.DstPort = be16(p[TCPDstPortOffset:])
	case ProtoUDP:
		if len(p) < UDPSize {
			return short
		}
		// A first fragment's length covers the whole datagram, so it can
		// only be checked against the header size.
		ul := int(be16(p[UDPLengthOffset:]))
		if ul < UDPSize || (m.Frag == FragNone && ul > len(p)) {
			return DropBadUDPLength
		}
		m.SrcPort = be16(p[UDPSrcPortOffset:])
		m.DstPort = be16(p[UDPDstPortOffset:])
	case ProtoICMP:
		if m.Family != IPv4 {
			return OK // ICMPv4 inside IPv6 is just an unknown protocol
		}
		if len(p) < ICMPv4MinimumSize {
			return short
		}
		return parseICMPv4(pkt, off, m)
	case ProtoICMPv6:
		if m.Family != IPv6 {
			return OK
		}
		if len(p) < ICMPv6MinimumSize {
			return short
		}
		return parseICMPv6(pkt, off, m)
	case ProtoESP:
		if len(p) < ESPMinimumSize {
			return short
		}
	case ProtoGRE:
		if len(p) < GREMinimumSize {
			return short
		}
	}
	return OK
}

func parseICMPv4(pkt []byte, off int, m *Meta) Result {
	h := ICMPv4Header(pkt[off : off+ICMPv4MinimumSize])
	t, c := h.Type(), h.Code()
	m.ICMPType, m.ICMPCode = t, c
	switch {
	case t == ICMPv4Echo || t == ICMPv4EchoReply:
		m.ICMPEchoID = h.Ident()
	case isICMPv4Error(t):
		if t == ICMPv4DstUnreachable && c == ICMPv4CodeFragNeeded {
			m.ICMPMTU = uint32(h.MTU())
		}
		return parseInnerIPv4(pkt, off+ICMPv4PayloadOffset, m)
	}
	return OK
}

func parseICMPv6(pkt []byte, off int, m *Meta) Result {
	h := ICMPv6Header(pkt[off : off+ICMPv6MinimumSize])
	t := h.Type()
	m.ICMPType, m.ICMPCode = t, h.Code()
	switch {
	case t == ICMPv6EchoRequest || t == ICMPv6EchoReply:
		m.ICMPEchoID = h.Ident()
	case isICMPv6Error(t):
		if t == ICMPv6PacketTooBig {
			m.ICMPMTU = h.MTU()
		}
		return parseInnerIPv6(pkt, off+ICMPv6PayloadOffset, m)
	}
	return OK
}

// quotedL4Size is how much of the quoted transport header an ICMP error
// must carry (RFC 792: "64 bits of Original Data Datagram").
const quotedL4Size = 8

// parseInnerIPv4 reads the IPv4 header quoted by an ICMP error at pkt[off:]
// and the first 8 bytes after it. The quoted total length and checksum are
// not checked: the quote is a copy, often cut short by its sender.
func parseInnerIPv4(pkt []byte, off int, m *Meta) Result {
	q := pkt[off:]
	if len(q) < IPv4MinimumSize+quotedL4Size {
		return DropICMPInnerTruncated
	}
	if q[0]>>4 != 4 {
		return DropICMPInnerMalformed
	}
	hl := int(q[0]&0x0f) * 4
	if hl < IPv4MinimumSize {
		return DropICMPInnerMalformed
	}
	if hl+quotedL4Size > len(q) {
		return DropICMPInnerTruncated
	}
	in := &m.Inner
	in.Proto = q[IPv4ProtocolOffset]
	mapIPv4(&in.Src, q[IPv4SrcAddrOffset:])
	mapIPv4(&in.Dst, q[IPv4DstAddrOffset:])
	if be16(q[IPv4FlagsFragOffset:])&IPv4FragOffsetMask == 0 {
		innerPorts(in, q[hl:])
	}
	m.InnerOff = uint16(off)
	m.HasInner = true
	return OK
}

// parseInnerIPv6 reads the IPv6 header quoted by an ICMPv6 error at
// pkt[off:], walks its extension headers within the same bounds as the
// outer packet, and reads the first 8 bytes of the quoted transport header.
func parseInnerIPv6(pkt []byte, off int, m *Meta) Result {
	q := pkt[off:]
	if len(q) < IPv6MinimumSize+quotedL4Size {
		return DropICMPInnerTruncated
	}
	if q[0]>>4 != 6 {
		return DropICMPInnerMalformed
	}
	w, r := walkIPv6(pkt, off+IPv6MinimumSize, q[IPv6NextHeaderOffset])
	switch r {
	case OK:
	case DropIPv6ExtHeaderTruncated, DropIPv6FragmentChainIncomplete:
		return DropICMPInnerTruncated
	default:
		return DropICMPInnerMalformed
	}
	if w.off+quotedL4Size > len(pkt) {
		return DropICMPInnerTruncated
	}
	in := &m.Inner
	in.Proto = w.proto
	in.Src = [16]byte(q[IPv6SrcAddrOffset:])
	in.Dst = [16]byte(q[IPv6DstAddrOffset:])
	if w.frag != FragNonFirst {
		innerPorts(in, pkt[w.off:])
	}
	m.InnerOff = uint16(off)
	m.HasInner = true
	return OK
}

// innerPorts fills the ports of a quoted TCP or UDP header (both keep them
// in the first 4 bytes); l4 holds at least quotedL4Size bytes.
func innerPorts(in *Tuple, l4 []byte) {
	if in.Proto == ProtoTCP || in.Proto == ProtoUDP {
		in.SrcPort = be16(l4[0:])
		in.DstPort = be16(l4[2:])
	}
}
