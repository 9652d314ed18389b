package encap

// Result says what Encap, Fragment or TooBig did with a frame. Values are
// dense so a caller can index counters with them; String gives the label.
type Result uint8

const (
	// OK: the frame at buf[newOff:newOff+newLen] is the packet for the
	// backend; transmit it.
	OK Result = iota
	// TooBig: the encapsulated packet would exceed the MTU, so the frame
	// was rewritten in place into an ICMP fragmentation-needed or ICMPv6
	// packet-too-big back to the client; transmit buf[newOff:newOff+newLen]
	// and count it (drop reason "packet-too-big").
	TooBig
	// NeedFragments: the encapsulated packet would exceed the MTU and the
	// inner IPv4 packet allows fragmentation; the frame is untouched. Get
	// FragmentCount-1 spare frames and call Fragment.
	NeedFragments
	// DropTooBig: too big, and no ICMP error may be sent about this packet
	// (it is an ICMP error itself, a non-first fragment, from a source
	// that must not receive errors, or Direct without DF); drop and count.
	DropTooBig
	// DropNoHeadroom: not enough room in front of the packet (or, for
	// Fragment, too few or too short spare frames); drop and count
	// ("encap-failed").
	DropNoHeadroom
	// DropFamily: the template cannot carry the packet's IP family
	// (IPv6 inside IPv4 is not supported).
	DropFamily
	// DropBadMeta: Meta does not describe an IP packet inside
	// buf[off:off+n]; a caller bug, counted rather than trusted.
	DropBadMeta

	numResults
)

// NumResults sizes counter arrays indexed by Result.
const NumResults = int(numResults)

var resultNames = [numResults]string{
	OK:             "ok",
	TooBig:         "packet-too-big",
	NeedFragments:  "need-fragments",
	DropTooBig:     "too-big-no-icmp",
	DropNoHeadroom: "no-headroom",
	DropFamily:     "unsupported-family",
	DropBadMeta:    "bad-meta",
}

// String returns the metric label of r.
func (r Result) String() string {
	if r < numResults {
		return resultNames[r]
	}
	return "unknown"
}
