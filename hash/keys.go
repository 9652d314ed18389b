package hash

import "github.com/xlbnet/xlb/pkg/packet"

// hasPorts reports whether a packet of this protocol and fragment state
// carries ports that take part in a 5-tuple: TCP and UDP, unfragmented.
// Any fragment, first or not, is port-less so that every fragment of a
// datagram hashes alike (DESIGN §3 "Fragments"); this holds for TCP too.
func hasPorts(proto uint8, frag packet.FragState) bool {
	return frag == packet.FragNone && (proto == packet.ProtoTCP || proto == packet.ProtoUDP)
}

// SelectionKind returns the tuple a packet's backend-selection hash covers
// under affinity a (DESIGN §3 "Session affinity"). An affinity outside the
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
// (DESIGN §3 "Trackability" and "Tracking key"), or TupleNone when the
// packet is not trackable: ICMP, ICMPv6 and protocols other than TCP, UDP,
// ESP and GRE never are; UDP, ESP and GRE are not under AffinityNone; a TCP
// fragment is port-less like a UDP fragment, and under AffinityNone it is
// not tracked (NONE tracks TCP by 5-tuple only). Unknown affinities are
// treated as AffinityNone, unknown modes as PerConnection.
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
func MakeKey(t *packet.Tuple, k TupleKind) Key {
	var key Key
	switch k {
	case Tuple5:
		key.SrcPort = t.SrcPort
		key.DstPort = t.DstPort
		fallthrough
	case Tuple3:
		key.Proto = t.Proto
		fallthrough
	case Tuple2:
		key.Src = t.Src
		key.Dst = t.Dst
		key.Kind = k
	}
	return key
}

// SelectionKey returns the key whose hash selects m's backend under
// affinity a. For an ICMP error the caller builds the key of the quoted
// flow instead: reverse m.Inner and use MakeKey with SelectionKind.
func SelectionKey(m *packet.Meta, a Affinity) Key {
	return MakeKey(&m.Tuple, SelectionKind(m.Proto, m.Frag, a))
}

// TrackingKey returns m's connection-tracking key under affinity a and
// tracking mode mode, and whether m is trackable at all. When it is not,
// the Key is zero and the packet is hashed per packet with SelectionKey.
func TrackingKey(m *packet.Meta, a Affinity, mode TrackingMode) (Key, bool) {
	k := TrackingKind(m.Proto, m.Frag, a, mode)
	if k == TupleNone {
		return Key{}, false
	}
	return MakeKey(&m.Tuple, k), true
}
