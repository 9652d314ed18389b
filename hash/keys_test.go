package hash

import (
	"testing"

	"github.com/xlbnet/xlb/pkg/packet"
)

// testMeta returns a parsed-packet Meta for a client flow
// 198.51.100.7:40000 → 203.0.113.10:443 (IPv4-mapped) with the given
// protocol and fragment state. Ports are cleared for non-first fragments
// and for port-less protocols, as Parse does.
func testMeta(proto uint8, frag packet.FragState) *packet.Meta {
	m := &packet.Meta{Family: packet.IPv4, Frag: frag}
	m.Src = [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 51, 14: 100, 15: 7}
	m.Dst = [16]byte{10: 0xff, 11: 0xff, 12: 203, 13: 0, 14: 113, 15: 10}
	m.Proto = proto
	if (proto == packet.ProtoTCP || proto == packet.ProtoUDP) && frag != packet.FragNonFirst {
		m.SrcPort, m.DstPort = 40000, 443
	}
	if frag != packet.FragNone {
		m.FragID = 0x1234
	}
	return m
}

// wantKey spells out by hand the Key of kind k for m: the covered fields
// copied, the rest zero.
func wantKey(m *packet.Meta, k TupleKind) Key {
	switch k {
	case Tuple5:
		return Key{Src: m.Src, Dst: m.Dst, Proto: m.Proto, SrcPort: m.SrcPort, DstPort: m.DstPort, Kind: Tuple5}
	case Tuple3:
		return Key{Src: m.Src, Dst: m.Dst, Proto: m.Proto, Kind: Tuple3}
	case Tuple2:
		return Key{Src: m.Src, Dst: m.Dst, Kind: Tuple2}
	}
	return Key{}
}

// dirtyKey returns a Key with every field set, to show that the Set
// methods overwrite what the caller's Key held.
func dirtyKey() Key {
	k := Key{SrcPort: 1, DstPort: 2, Proto: 3, Kind: Tuple5}
	for i := range k.Src {
		k.Src[i], k.Dst[i] = 0xaa, 0xbb
	}
	return k
}

// Packet classes the tables of docs/design.md#session-affinity and
// docs/design.md#tracking-key distinguish.
var (
	tcp          = testMeta(packet.ProtoTCP, packet.FragNone)
	tcpFirstFrag = testMeta(packet.ProtoTCP, packet.FragFirst)
	udp          = testMeta(packet.ProtoUDP, packet.FragNone)
	udpFirstFrag = testMeta(packet.ProtoUDP, packet.FragFirst)
	udpLaterFrag = testMeta(packet.ProtoUDP, packet.FragNonFirst)
	esp          = testMeta(packet.ProtoESP, packet.FragNone)
	gre          = testMeta(packet.ProtoGRE, packet.FragNone)
	icmp         = testMeta(packet.ProtoICMP, packet.FragNone)
	icmpv6       = testMeta(packet.ProtoICMPv6, packet.FragNone)
	sctp         = testMeta(132, packet.FragNone)
	espFrag      = testMeta(packet.ProtoESP, packet.FragNonFirst)
)

// TestSelectionKey has one row per cell of the table of
// docs/design.md#session-affinity, split by the packet classes the cell names.
func TestSelectionKey(t *testing.T) {
	tests := []struct {
		name string
		m    *packet.Meta
		a    Affinity
		want TupleKind
	}{
		{"NONE/TCP: 5-tuple", tcp, AffinityNone, Tuple5},
		{"NONE/unfragmented UDP: 5-tuple", udp, AffinityNone, Tuple5},
		{"NONE/UDP first fragment: 3-tuple", udpFirstFrag, AffinityNone, Tuple3},
		{"NONE/UDP non-first fragment: 3-tuple", udpLaterFrag, AffinityNone, Tuple3},
		{"NONE/TCP fragment: 3-tuple (decision)", tcpFirstFrag, AffinityNone, Tuple3},
		{"NONE/other protocol ESP: 3-tuple", esp, AffinityNone, Tuple3},
		{"NONE/other protocol GRE: 3-tuple", gre, AffinityNone, Tuple3},
		{"NONE/other protocol ICMP: 3-tuple", icmp, AffinityNone, Tuple3},
		{"NONE/other protocol ICMPv6: 3-tuple", icmpv6, AffinityNone, Tuple3},
		{"NONE/other protocol SCTP: 3-tuple", sctp, AffinityNone, Tuple3},

		{"CLIENT_IP_PORT_PROTO/TCP: 5-tuple", tcp, AffinityClientIPPortProto, Tuple5},
		{"CLIENT_IP_PORT_PROTO/unfragmented UDP: 5-tuple", udp, AffinityClientIPPortProto, Tuple5},
		{"CLIENT_IP_PORT_PROTO/UDP first fragment: 3-tuple", udpFirstFrag, AffinityClientIPPortProto, Tuple3},
		{"CLIENT_IP_PORT_PROTO/UDP non-first fragment: 3-tuple", udpLaterFrag, AffinityClientIPPortProto, Tuple3},
		{"CLIENT_IP_PORT_PROTO/TCP fragment: 3-tuple (decision)", tcpFirstFrag, AffinityClientIPPortProto, Tuple3},
		{"CLIENT_IP_PORT_PROTO/other protocol ESP: 3-tuple", esp, AffinityClientIPPortProto, Tuple3},
		{"CLIENT_IP_PORT_PROTO/other protocol ICMP: 3-tuple", icmp, AffinityClientIPPortProto, Tuple3},

		{"CLIENT_IP_PROTO/TCP: 3-tuple", tcp, AffinityClientIPProto, Tuple3},
		{"CLIENT_IP_PROTO/unfragmented UDP: 3-tuple", udp, AffinityClientIPProto, Tuple3},
		{"CLIENT_IP_PROTO/UDP non-first fragment: 3-tuple", udpLaterFrag, AffinityClientIPProto, Tuple3},
		{"CLIENT_IP_PROTO/ICMP: 3-tuple", icmp, AffinityClientIPProto, Tuple3},

		{"CLIENT_IP/TCP: 2-tuple", tcp, AffinityClientIP, Tuple2},
		{"CLIENT_IP/unfragmented UDP: 2-tuple", udp, AffinityClientIP, Tuple2},
		{"CLIENT_IP/UDP non-first fragment: 2-tuple", udpLaterFrag, AffinityClientIP, Tuple2},
		{"CLIENT_IP/ICMP: 2-tuple", icmp, AffinityClientIP, Tuple2},

		{"unknown affinity is NONE/TCP: 5-tuple", tcp, Affinity(99), Tuple5},
		{"unknown affinity is NONE/ICMP: 3-tuple", icmp, Affinity(99), Tuple3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := wantKey(tt.m, tt.want)
			if got := SelectionKey(tt.m, tt.a); got != want {
				t.Errorf("SelectionKey = %+v, want %+v", got, want)
			}
			got := dirtyKey()
			if got.SetSelection(tt.m, tt.a); got != want {
				t.Errorf("SetSelection = %+v, want %+v", got, want)
			}
		})
	}
}

// TestTrackingKey has one row per cell of docs/design.md#tracking-key (and
// docs/design.md#trackability), split by the packet classes the cell names;
// TupleNone means not trackable.
func TestTrackingKey(t *testing.T) {
	const (
		perConn = PerConnection
		perSess = PerSession
	)
	tests := []struct {
		name string
		m    *packet.Meta
		a    Affinity
		mode TrackingMode
		want TupleKind
	}{
		// NONE: TCP only, 5-tuple, in both modes.
		{"NONE/PER_CONNECTION/TCP: 5-tuple", tcp, AffinityNone, perConn, Tuple5},
		{"NONE/PER_CONNECTION/UDP: not tracked", udp, AffinityNone, perConn, TupleNone},
		{"NONE/PER_CONNECTION/UDP fragment: not tracked", udpLaterFrag, AffinityNone, perConn, TupleNone},
		{"NONE/PER_CONNECTION/ESP: not tracked", esp, AffinityNone, perConn, TupleNone},
		{"NONE/PER_CONNECTION/GRE: not tracked", gre, AffinityNone, perConn, TupleNone},
		{"NONE/PER_CONNECTION/TCP fragment: not tracked (decision)", tcpFirstFrag, AffinityNone, perConn, TupleNone},
		{"NONE/PER_SESSION/TCP: 5-tuple", tcp, AffinityNone, perSess, Tuple5},
		{"NONE/PER_SESSION/UDP: not tracked", udp, AffinityNone, perSess, TupleNone},
		{"NONE/PER_SESSION/ESP: not tracked", esp, AffinityNone, perSess, TupleNone},
		{"NONE/PER_SESSION/TCP fragment: not tracked (decision)", tcpFirstFrag, AffinityNone, perSess, TupleNone},

		// CLIENT_IP_PORT_PROTO: the same in both modes.
		{"CLIENT_IP_PORT_PROTO/PER_CONNECTION/TCP: 5-tuple", tcp, AffinityClientIPPortProto, perConn, Tuple5},
		{"CLIENT_IP_PORT_PROTO/PER_CONNECTION/unfragmented UDP: 5-tuple", udp, AffinityClientIPPortProto, perConn, Tuple5},
		{"CLIENT_IP_PORT_PROTO/PER_CONNECTION/UDP first fragment: 3-tuple", udpFirstFrag, AffinityClientIPPortProto, perConn, Tuple3},
		{"CLIENT_IP_PORT_PROTO/PER_CONNECTION/UDP non-first fragment: 3-tuple", udpLaterFrag, AffinityClientIPPortProto, perConn, Tuple3},
		{"CLIENT_IP_PORT_PROTO/PER_CONNECTION/ESP: 3-tuple", esp, AffinityClientIPPortProto, perConn, Tuple3},
		{"CLIENT_IP_PORT_PROTO/PER_CONNECTION/GRE: 3-tuple", gre, AffinityClientIPPortProto, perConn, Tuple3},
		{"CLIENT_IP_PORT_PROTO/PER_CONNECTION/TCP fragment: 3-tuple (decision)", tcpFirstFrag, AffinityClientIPPortProto, perConn, Tuple3},
		{"CLIENT_IP_PORT_PROTO/PER_SESSION/TCP: 5-tuple", tcp, AffinityClientIPPortProto, perSess, Tuple5},
		{"CLIENT_IP_PORT_PROTO/PER_SESSION/unfragmented UDP: 5-tuple", udp, AffinityClientIPPortProto, perSess, Tuple5},
		{"CLIENT_IP_PORT_PROTO/PER_SESSION/UDP fragment: 3-tuple", udpLaterFrag, AffinityClientIPPortProto, perSess, Tuple3},
		{"CLIENT_IP_PORT_PROTO/PER_SESSION/ESP: 3-tuple", esp, AffinityClientIPPortProto, perSess, Tuple3},
		{"CLIENT_IP_PORT_PROTO/PER_SESSION/GRE: 3-tuple", gre, AffinityClientIPPortProto, perSess, Tuple3},

		// CLIENT_IP_PROTO
		{"CLIENT_IP_PROTO/PER_CONNECTION/TCP: 5-tuple", tcp, AffinityClientIPProto, perConn, Tuple5},
		{"CLIENT_IP_PROTO/PER_CONNECTION/unfragmented UDP: 5-tuple", udp, AffinityClientIPProto, perConn, Tuple5},
		{"CLIENT_IP_PROTO/PER_CONNECTION/UDP fragment: 3-tuple", udpLaterFrag, AffinityClientIPProto, perConn, Tuple3},
		{"CLIENT_IP_PROTO/PER_CONNECTION/ESP: 3-tuple", esp, AffinityClientIPProto, perConn, Tuple3},
		{"CLIENT_IP_PROTO/PER_CONNECTION/GRE: 3-tuple", gre, AffinityClientIPProto, perConn, Tuple3},
		{"CLIENT_IP_PROTO/PER_SESSION/TCP: 3-tuple", tcp, AffinityClientIPProto, perSess, Tuple3},
		{"CLIENT_IP_PROTO/PER_SESSION/UDP: 3-tuple", udp, AffinityClientIPProto, perSess, Tuple3},
		{"CLIENT_IP_PROTO/PER_SESSION/UDP fragment: 3-tuple", udpLaterFrag, AffinityClientIPProto, perSess, Tuple3},
		{"CLIENT_IP_PROTO/PER_SESSION/ESP: 3-tuple", esp, AffinityClientIPProto, perSess, Tuple3},
		{"CLIENT_IP_PROTO/PER_SESSION/GRE: 3-tuple", gre, AffinityClientIPProto, perSess, Tuple3},

		// CLIENT_IP
		{"CLIENT_IP/PER_CONNECTION/TCP: 5-tuple", tcp, AffinityClientIP, perConn, Tuple5},
		{"CLIENT_IP/PER_CONNECTION/unfragmented UDP: 5-tuple", udp, AffinityClientIP, perConn, Tuple5},
		{"CLIENT_IP/PER_CONNECTION/UDP fragment: 3-tuple", udpFirstFrag, AffinityClientIP, perConn, Tuple3},
		{"CLIENT_IP/PER_CONNECTION/ESP: 3-tuple", esp, AffinityClientIP, perConn, Tuple3},
		{"CLIENT_IP/PER_CONNECTION/GRE: 3-tuple", gre, AffinityClientIP, perConn, Tuple3},
		{"CLIENT_IP/PER_SESSION/TCP: 2-tuple", tcp, AffinityClientIP, perSess, Tuple2},
		{"CLIENT_IP/PER_SESSION/UDP: 2-tuple", udp, AffinityClientIP, perSess, Tuple2},
		{"CLIENT_IP/PER_SESSION/UDP fragment: 2-tuple", udpLaterFrag, AffinityClientIP, perSess, Tuple2},
		{"CLIENT_IP/PER_SESSION/ESP fragment: 2-tuple", espFrag, AffinityClientIP, perSess, Tuple2},
		{"CLIENT_IP/PER_SESSION/GRE: 2-tuple", gre, AffinityClientIP, perSess, Tuple2},

		// Trackability: ICMP, ICMPv6 and other protocols never, under any cell.
		{"CLIENT_IP/PER_SESSION/ICMP: never tracked", icmp, AffinityClientIP, perSess, TupleNone},
		{"CLIENT_IP_PROTO/PER_CONNECTION/ICMPv6: never tracked", icmpv6, AffinityClientIPProto, perConn, TupleNone},
		{"CLIENT_IP_PORT_PROTO/PER_CONNECTION/SCTP: never tracked", sctp, AffinityClientIPPortProto, perConn, TupleNone},
		{"NONE/PER_CONNECTION/ICMP: never tracked", icmp, AffinityNone, perConn, TupleNone},

		// Out-of-enum values fall back to the defaults.
		{"unknown affinity is NONE/UDP: not tracked", udp, Affinity(99), perConn, TupleNone},
		{"unknown mode is PER_CONNECTION/CLIENT_IP/TCP: 5-tuple", tcp, AffinityClientIP, TrackingMode(9), Tuple5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantOK, want := tt.want != TupleNone, wantKey(tt.m, tt.want)
			got, ok := TrackingKey(tt.m, tt.a, tt.mode)
			if ok != wantOK || got != want {
				t.Errorf("TrackingKey = %+v, %v; want %+v, %v", got, ok, want, wantOK)
			}
			got = dirtyKey()
			if ok := got.SetTracking(tt.m, tt.a, tt.mode); ok != wantOK || got != want {
				t.Errorf("SetTracking = %+v, %v; want %+v, %v", got, ok, want, wantOK)
			}
		})
	}
}

// TestKeyIgnoresUncoveredFields checks that two packets that differ only
// in fields outside the key's kind give equal keys (and equal hashes).
func TestKeyIgnoresUncoveredFields(t *testing.T) {
	a := *testMeta(packet.ProtoTCP, packet.FragNone)
	b := a
	b.SrcPort, b.DstPort, b.TTL, b.TCPFlags = 1, 2, 64, packet.TCPFlagSYN
	for _, aff := range []Affinity{AffinityClientIPProto, AffinityClientIP} {
		ka, kb := SelectionKey(&a, aff), SelectionKey(&b, aff)
		if ka != kb || Sum64(&ka, 1) != Sum64(&kb, 1) {
			t.Errorf("affinity %d: keys differ: %+v vs %+v", aff, ka, kb)
		}
	}
	c := b
	c.Proto = packet.ProtoUDP
	ka, kc := SelectionKey(&a, AffinityClientIP), SelectionKey(&c, AffinityClientIP)
	if ka != kc {
		t.Errorf("CLIENT_IP: protocol changed the key: %+v vs %+v", ka, kc)
	}
	if k5a, k5b := SelectionKey(&a, AffinityNone), SelectionKey(&b, AffinityNone); k5a == k5b {
		t.Error("NONE: different ports gave equal 5-tuple keys")
	}
}

// TestSelectionHashMatchesKey checks the fused path against building the
// key and hashing it, for every packet class and affinity.
func TestSelectionHashMatchesKey(t *testing.T) {
	classes := []*packet.Meta{tcp, tcpFirstFrag, udp, udpFirstFrag, udpLaterFrag, esp, gre, icmp, icmpv6, sctp, espFrag}
	for _, m := range classes {
		for a := AffinityNone; a <= AffinityClientIP+1; a++ {
			k := SelectionKey(m, a)
			if got, want := SelectionHash(m, a, 77), Sum64(&k, 77); got != want {
				t.Errorf("proto %d frag %d affinity %d: SelectionHash = %#x, Sum64(SelectionKey) = %#x", m.Proto, m.Frag, a, got, want)
			}
		}
	}
}

func TestKeyZeroAllocs(t *testing.T) {
	m := testMeta(packet.ProtoUDP, packet.FragNone)
	var sink uint64
	n := testing.AllocsPerRun(100, func() {
		k := SelectionKey(m, AffinityClientIPPortProto)
		sink += Sum64(&k, 42)
		k.SetSelection(m, AffinityNone)
		sink += Sum64(&k, 42)
		if k.SetTracking(m, AffinityClientIP, PerSession) {
			sink += Sum64(&k, 42)
		}
		sink += SelectionHash(m, AffinityClientIP, 42)
		tk, ok := TrackingKey(m, AffinityClientIPProto, PerSession)
		if ok {
			sink += Sum64(&tk, 42)
		}
	})
	if n != 0 {
		t.Errorf("key construction and Sum64: %v allocs per run, want 0", n)
	}
	_ = sink
}
