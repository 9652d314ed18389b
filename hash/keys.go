package hash

import "github.com/xlbnet/xlb/pkg/packet"

// hasPorts reports whether a packet of this protocol and fragment state
// carries ports that take part in a 5-tuple: TCP and UDP, unfragmented.
// Any fragment, first or not, is port-less so that every fragment of a
// datagram hashes alike (docs/design.md#fragments); this holds for TCP too.
func hasPorts(proto uint8, frag packet.FragState) bool {
	return frag == packet.FragNone && (proto == packet.ProtoTCP || proto == packet.ProtoUDP)
}

// SelectionKind returns the tuple a packet's backend-selection hash covers
// under affinity a (docs/design.md#session-affinity). An affinity outside the
// enum is treated as AffinityNone, the default.
func SelectionKind(proto uint8, frag packet.FragState, a Affinity) TupleKind {
	switch a {
	case AffinityClientIPProto:
		return Tuple3
	case AffinityClientIP:
		return Tuple2
	default: // AffinityNone, AffinityClientIPPortProto
		if hasPorts(proto, frag) {
			return Tuple5
		}
		return Tuple3
	}
}

// TrackingKind returns the tuple a packet's connection-tracking key covers
// (docs/design.md#trackability and docs/design.md#tracking-key), or TupleNone
// when the packet is not trackable: ICMP, ICMPv6 and protocols other than
// TCP, UDP, ESP and GRE never are; UDP, ESP and GRE are not under
// AffinityNone; a TCP fragment is port-less like a UDP fragment, and under
// AffinityNone it is not tracked (NONE tracks TCP by 5-tuple only). Unknown
// affinities are treated as AffinityNone, unknown modes as PerConnection.
func TrackingKind(proto uint8, frag packet.FragState, a Affinity, mode TrackingMode) TupleKind {
	switch proto {
	case packet.ProtoTCP, packet.ProtoUDP, packet.ProtoESP, packet.ProtoGRE:
	default:
		return TupleNone
	}
	ports := hasPorts(proto, frag)
	switch a {
	case AffinityClientIPPortProto:
		// PER_SESSION is the same as PER_CONNECTION here.
	case AffinityClientIPProto:
		if mode == PerSession {
			return Tuple3
		}
	case AffinityClientIP:
		if mode == PerSession {
			return Tuple2
		}
	default: // AffinityNone: TCP by 5-tuple in both modes, nothing else.
		if proto == packet.ProtoTCP && ports {
			return Tuple5
		}
		return TupleNone
	}
	if ports {
		return Tuple5
	}
	return Tuple3
}

// MakeKey returns the Key of kind k for flow t: the fields k covers are
// copied and the others stay zero, so equal flows give equal keys.
// TupleNone (or any other value) gives the zero Key.
func MakeKey(t *packet.Tuple, k TupleKind) (key Key) {
	key.set(t, k)
	return key
}

// set makes *key the Key of kind k for flow t.
func (key *Key) set(t *packet.Tuple, k TupleKind) {
	*key = Key{}
	if k != Tuple2 && k != Tuple3 && k != Tuple5 {
		return
	}
	key.Src, key.Dst, key.Kind = t.Src, t.Dst, k
	if k != Tuple2 {
		key.Proto = t.Proto
	}
	if k == Tuple5 {
		key.SrcPort, key.DstPort = t.SrcPort, t.DstPort
	}
}

// SetSelection makes *key the key whose hash selects m's backend under
// affinity a. It is the packet-path form of SelectionKey: it writes the
// caller's Key in place. (Returning a freshly built 40-byte Key by value
// from a call that is not inlined copies it with overlapping 16-byte
// moves over the narrow field stores, which stalls store-to-load
// forwarding: about twice the cost of key, hash and lookup together.)
//
// For an ICMP error the caller builds the key of the quoted flow instead:
// reverse m.Inner and use MakeKey with SelectionKind.
func (key *Key) SetSelection(m *packet.Meta, a Affinity) {
	key.set(&m.Tuple, SelectionKind(m.Proto, m.Frag, a))
}

// SetTracking makes *key m's connection-tracking key under affinity a and
// tracking mode mode, and reports whether m is trackable at all; when it
// is not, *key is zero. It is the packet-path form of TrackingKey.
func (key *Key) SetTracking(m *packet.Meta, a Affinity, mode TrackingMode) bool {
	k := TrackingKind(m.Proto, m.Frag, a, mode)
	key.set(&m.Tuple, k)
	return k != TupleNone
}

// SelectionKey returns the key whose hash selects m's backend under
// affinity a; see SetSelection for the packet path.
func SelectionKey(m *packet.Meta, a Affinity) (key Key) {
	key.SetSelection(m, a)
	return key
}

// SelectionHash is Sum64(SelectionKey(m, a), seed) without building the
// key: what the packet path needs on a conntrack miss.
func SelectionHash(m *packet.Meta, a Affinity, seed uint64) uint64 {
	return SumTuple(&m.Tuple, SelectionKind(m.Proto, m.Frag, a), seed)
}

// TrackingKey returns m's connection-tracking key under affinity a and
// tracking mode mode, and whether m is trackable at all. When it is not,
// the Key is zero and the packet is hashed per packet with SelectionKey.
// See SetTracking for the packet path.
func TrackingKey(m *packet.Meta, a Affinity, mode TrackingMode) (key Key, ok bool) {
	ok = key.SetTracking(m, a, mode)
	return key, ok
}
