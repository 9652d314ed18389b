package packet

// Result is the outcome of Parse: OK, a reason to hand the frame to the
// kernel, or the one reason it was dropped. It indexes per-queue counters,
// so values are dense and stable within a build; String gives the metric
// label.
type Result uint8

const (
	// OK: Meta is filled in and describes an IPv4 or IPv6 packet.
	OK Result = iota

	// PassNonIP: not IPv4 or IPv6 (ARP, LLDP, 802.3 length frames, unknown
	// EtherType). The appliance's own kernel must still see these.
	PassNonIP
	// PassUnsupportedL2: a second VLAN tag (QinQ, 802.1ad S-tag). Not ours
	// to parse; the kernel decides.
	PassUnsupportedL2

	// DropTruncatedL2: shorter than an Ethernet header (plus its VLAN tag).
	DropTruncatedL2
	// DropTruncatedL3: shorter than the fixed IPv4 (20) or IPv6 (40) header.
	DropTruncatedL3
	// DropTruncatedL4: the IP payload is shorter than the transport header
	// it announces (TCP 20, UDP 8, ICMP 8, ESP 8, GRE 4 bytes).
	DropTruncatedL4
	// DropBadIPVersion: the version nibble disagrees with the EtherType.
	DropBadIPVersion
	// DropIPv4IHLTooSmall: IHL < 5.
	DropIPv4IHLTooSmall
	// DropIPv4IHLBeyondFrame: IHL*4 runs past the frame.
	DropIPv4IHLBeyondFrame
	// DropIPv4TotalLengthTooSmall: total length < IHL*4.
	DropIPv4TotalLengthTooSmall
	// DropIPv4TotalLengthBeyondFrame: total length runs past the frame.
	DropIPv4TotalLengthBeyondFrame
	// DropIPv4BadChecksum: the IPv4 header checksum does not verify.
	DropIPv4BadChecksum
	// DropIPv6PayloadLengthBeyondFrame: 40 + payload length runs past the frame.
	DropIPv6PayloadLengthBeyondFrame
	// DropIPv6ExtChainTooLong: more than MaxIPv6ExtHeaders extension headers
	// or more than MaxIPv6ExtBytes bytes of them.
	DropIPv6ExtChainTooLong
	// DropIPv6ExtHeaderTruncated: an extension header runs past the packet
	// (unfragmented packets).
	DropIPv6ExtHeaderTruncated
	// DropIPv6HopByHopMisplaced: a hop-by-hop options header that is not the
	// first header after IPv6, or a second one.
	DropIPv6HopByHopMisplaced
	// DropIPv6FragmentRepeated: a second fragment header in one chain.
	DropIPv6FragmentRepeated
	// DropIPv6FragmentChainIncomplete: a first fragment that does not hold
	// the whole header chain up to and including the transport header
	// (RFC 7112).
	DropIPv6FragmentChainIncomplete
	// DropFragmentTiny: an IPv4 first fragment too short for its transport
	// header, or a TCP fragment at offset 1 (8 bytes) that could overwrite
	// the TCP flags (RFC 1858).
	DropFragmentTiny
	// DropFragmentOverflow: fragment offset + fragment length > 65535
	// ("ping of death").
	DropFragmentOverflow
	// DropBadTCPDataOffset: TCP data offset < 5 or past the packet end.
	DropBadTCPDataOffset
	// DropBadTCPFlags: SYN+FIN, SYN+RST, or none of FIN/SYN/RST/PSH/ACK/URG.
	DropBadTCPFlags
	// DropBadUDPLength: UDP length < 8, or (unfragmented) past the packet end.
	DropBadUDPLength
	// DropICMPInnerTruncated: an ICMP error quoting less than the quoted
	// IP header + 8 bytes of its transport header (RFC 792, RFC 4443).
	DropICMPInnerTruncated
	// DropICMPInnerMalformed: the quoted IP header is not a valid header of
	// the ICMP family (wrong version, IHL < 5, extension chain too long or
	// misordered).
	DropICMPInnerMalformed
	// DropFrameTooLong: the frame is longer than 65535 bytes, which the
	// uint16 offsets of Meta cannot describe.
	DropFrameTooLong

	numResults
)

// NumResults is the number of Result values; counters can be sized
// [NumResults]uint64 and indexed by Result.
const NumResults = int(numResults)

var resultNames = [numResults]string{
	OK:                               "ok",
	PassNonIP:                        "pass-non-ip",
	PassUnsupportedL2:                "pass-unsupported-l2",
	DropTruncatedL2:                  "truncated-l2",
	DropTruncatedL3:                  "truncated-l3",
	DropTruncatedL4:                  "truncated-l4",
	DropBadIPVersion:                 "bad-ip-version",
	DropIPv4IHLTooSmall:              "ipv4-ihl-too-small",
	DropIPv4IHLBeyondFrame:           "ipv4-ihl-beyond-frame",
	DropIPv4TotalLengthTooSmall:      "ipv4-total-length-too-small",
	DropIPv4TotalLengthBeyondFrame:   "ipv4-total-length-beyond-frame",
	DropIPv4BadChecksum:              "ipv4-bad-checksum",
	DropIPv6PayloadLengthBeyondFrame: "ipv6-payload-length-beyond-frame",
	DropIPv6ExtChainTooLong:          "ipv6-ext-chain-too-long",
	DropIPv6ExtHeaderTruncated:       "ipv6-ext-header-truncated",
	DropIPv6HopByHopMisplaced:        "ipv6-hop-by-hop-misplaced",
	DropIPv6FragmentRepeated:         "ipv6-fragment-repeated",
	DropIPv6FragmentChainIncomplete:  "ipv6-fragment-chain-incomplete",
	DropFragmentTiny:                 "fragment-tiny",
	DropFragmentOverflow:             "fragment-overflow",
	DropBadTCPDataOffset:             "bad-tcp-data-offset",
	DropBadTCPFlags:                  "bad-tcp-flags",
	DropBadUDPLength:                 "bad-udp-length",
	DropICMPInnerTruncated:           "icmp-inner-truncated",
	DropICMPInnerMalformed:           "icmp-inner-malformed",
	DropFrameTooLong:                 "frame-too-long",
}

// String returns the metric label of r, e.g. "truncated-l3".
func (r Result) String() string {
	if r < numResults {
		return resultNames[r]
	}
	return "unknown"
}

// Class groups Results by what the caller does with the frame.
type Class uint8

const (
	ClassOK   Class = iota // forward-path candidate: Meta is valid
	ClassPass              // hand to the kernel (XDP_PASS equivalent)
	ClassDrop              // malformed: drop and count r
)

// String returns "ok", "pass" or "drop".
func (c Class) String() string {
	switch c {
	case ClassOK:
		return "ok"
	case ClassPass:
		return "pass"
	}
	return "drop"
}

// Class tells whether r means ok, pass to the kernel, or drop. Unknown
// values are drops.
func (r Result) Class() Class {
	switch {
	case r == OK:
		return ClassOK
	case r == PassNonIP || r == PassUnsupportedL2:
		return ClassPass
	}
	return ClassDrop
}

// IsDrop reports whether r is a drop reason.
func (r Result) IsDrop() bool { return r.Class() == ClassDrop }
