package dataplane

// Conformance tests: one test per row or cell of
// docs/design.md#behaviour-contract, each driving Decide with packets and a
// fake clock and asserting the backend chosen.
//
// The probe used throughout: a first packet is placed while backends
// 192.0.2.1-3 are eligible; then the eligible set becomes 192.0.2.4 alone.
// A later packet that still reaches the first packet's backend was decided
// by a tracked entry; one that reaches 192.0.2.4 was placed afresh.

import (
	"fmt"
	"testing"

	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/packet"
)

const fresh = "192.0.2.4" // the only eligible backend after the switch

func probeWorld(t *testing.T, spec ruleSpec) *world {
	spec.backends = names(4)
	spec.eligible = names(3)
	return newWorld(t, spec)
}

// switchAll makes 192.0.2.4 the only eligible backend.
func (w *world) switchAll() { w.setEligible([]string{fresh}, nil) }

// tracked sends first, switches the eligible set, sends second, and
// reports whether second followed first's backend.
func tracked(t *testing.T, spec ruleSpec, first, second pkt) bool {
	t.Helper()
	w := probeWorld(t, spec)
	b1 := w.send(first)
	if b1 == fresh || len(b1) > 15 {
		t.Fatalf("first packet went to %q", b1)
	}
	w.switchAll()
	b2 := w.send(second)
	switch b2 {
	case b1:
		return true
	case fresh:
		return false
	}
	t.Fatalf("second packet went to %q (first to %q)", b2, b1)
	return false
}

func keyOf(kind hash.TupleKind, src string, sport uint16, dport uint16, proto uint8) hash.Key {
	k := hash.Key{Src: addr16(src), Dst: testVIP, Kind: kind}
	if kind >= hash.Tuple3 {
		k.Proto = proto
	}
	if kind == hash.Tuple5 {
		k.SrcPort, k.DstPort = sport, dport
	}
	return k
}

// Session affinity → backend-selection hash (docs/design.md#session-affinity).
func TestSelectionHash(t *testing.T) {
	const c = "198.51.100.7"
	frag := udp(c, 4000)
	frag.frag, frag.fragID = packet.FragNonFirst, 77
	first := udp(c, 4000)
	first.frag, first.fragID = packet.FragFirst, 77
	esp := pkt{src: c, proto: packet.ProtoESP}
	tests := []struct {
		name     string
		affinity hash.Affinity
		protocol RuleProtocol
		p        pkt
		want     hash.Key
	}{
		{"NONE/TCP/5-tuple", hash.AffinityNone, RuleTCP, tcp(c, 4000, syn), keyOf(hash.Tuple5, c, 4000, 80, packet.ProtoTCP)},
		{"NONE/unfragmented-UDP/5-tuple", hash.AffinityNone, RuleUDP, udp(c, 4000), keyOf(hash.Tuple5, c, 4000, 53, packet.ProtoUDP)},
		{"NONE/UDP-first-fragment/3-tuple", hash.AffinityNone, RuleUDP, first, keyOf(hash.Tuple3, c, 0, 0, packet.ProtoUDP)},
		{"NONE/UDP-non-first-fragment/3-tuple", hash.AffinityNone, RuleUDP, frag, keyOf(hash.Tuple3, c, 0, 0, packet.ProtoUDP)},
		{"NONE/ESP/3-tuple", hash.AffinityNone, RuleL3Default, esp, keyOf(hash.Tuple3, c, 0, 0, packet.ProtoESP)},
		{"CLIENT_IP_PORT_PROTO/TCP/5-tuple", hash.AffinityClientIPPortProto, RuleTCP, tcp(c, 4000, syn), keyOf(hash.Tuple5, c, 4000, 80, packet.ProtoTCP)},
		{"CLIENT_IP_PORT_PROTO/UDP-fragment/3-tuple", hash.AffinityClientIPPortProto, RuleUDP, frag, keyOf(hash.Tuple3, c, 0, 0, packet.ProtoUDP)},
		{"CLIENT_IP_PROTO/TCP/3-tuple", hash.AffinityClientIPProto, RuleTCP, tcp(c, 4000, syn), keyOf(hash.Tuple3, c, 0, 0, packet.ProtoTCP)},
		{"CLIENT_IP_PROTO/UDP/3-tuple", hash.AffinityClientIPProto, RuleUDP, udp(c, 4000), keyOf(hash.Tuple3, c, 0, 0, packet.ProtoUDP)},
		{"CLIENT_IP/TCP/2-tuple", hash.AffinityClientIP, RuleTCP, tcp(c, 4000, syn), keyOf(hash.Tuple2, c, 0, 0, 0)},
		{"CLIENT_IP/ESP/2-tuple", hash.AffinityClientIP, RuleL3Default, esp, keyOf(hash.Tuple2, c, 0, 0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, ruleSpec{affinity: tt.affinity, protocol: tt.protocol, allPorts: tt.protocol != RuleTCP, backends: names(5)})
			d := w.snap.Decide(tt.p.meta(), w.q, w.now)
			if d.Verdict != Tx {
				t.Fatalf("verdict %v %v", d.Verdict, d.Reason)
			}
			if want := hash.Sum64(&tt.want, testSeed); d.Hash != want {
				t.Errorf("selection hash %#x, want %#x (the %d-tuple)", d.Hash, want, tt.want.Kind)
			}
		})
	}
}

// Trackability: TCP always; UDP, ESP, GRE unless affinity is NONE; ICMP never.
func TestTrackability(t *testing.T) {
	const c = "198.51.100.8"
	esp := pkt{src: c, proto: packet.ProtoESP}
	gre := pkt{src: c, proto: packet.ProtoGRE}
	icmp := pkt{src: c, proto: packet.ProtoICMP, icmp: 13} // timestamp request: forwarded, not answered
	tests := []struct {
		name     string
		affinity hash.Affinity
		protocol RuleProtocol
		p        pkt
		want     bool
	}{
		{"TCP/NONE/tracked", hash.AffinityNone, RuleTCP, tcp(c, 1, ack), true},
		{"TCP/CLIENT_IP/tracked", hash.AffinityClientIP, RuleTCP, tcp(c, 1, ack), true},
		{"UDP/NONE/not-tracked", hash.AffinityNone, RuleUDP, udp(c, 1), false},
		{"UDP/CLIENT_IP_PORT_PROTO/tracked", hash.AffinityClientIPPortProto, RuleUDP, udp(c, 1), true},
		{"UDP/CLIENT_IP_PROTO/tracked", hash.AffinityClientIPProto, RuleUDP, udp(c, 1), true},
		{"UDP/CLIENT_IP/tracked", hash.AffinityClientIP, RuleUDP, udp(c, 1), true},
		{"ESP/NONE/not-tracked", hash.AffinityNone, RuleL3Default, esp, false},
		{"ESP/CLIENT_IP/tracked", hash.AffinityClientIP, RuleL3Default, esp, true},
		{"GRE/NONE/not-tracked", hash.AffinityNone, RuleL3Default, gre, false},
		{"GRE/CLIENT_IP_PROTO/tracked", hash.AffinityClientIPProto, RuleL3Default, gre, true},
		{"ICMP/NONE/never-tracked", hash.AffinityNone, RuleL3Default, icmp, false},
		{"ICMP/CLIENT_IP/never-tracked", hash.AffinityClientIP, RuleL3Default, icmp, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := ruleSpec{affinity: tt.affinity, protocol: tt.protocol, allPorts: tt.protocol != RuleTCP}
			if got := tracked(t, spec, tt.p, tt.p); got != tt.want {
				t.Errorf("tracked = %v, want %v", got, tt.want)
			}
		})
	}
}

// Tracking key: every cell of docs/design.md#tracking-key. Each row places a
// first packet, then checks whether a second packet that differs in some
// fields shares its entry (same key) or not.
func TestTrackingKey(t *testing.T) {
	const c = "198.51.100.9"
	otherPort := func(p pkt) pkt { p.sport++; return p }
	nonFirst := func(p pkt) pkt { p.frag, p.fragID = packet.FragNonFirst, 9; return p }
	esp := pkt{src: c, proto: packet.ProtoESP}
	type row struct {
		name          string
		affinity      hash.Affinity
		mode          hash.TrackingMode
		protocol      RuleProtocol
		first, second pkt
		shared        bool
	}
	pc, ps := hash.PerConnection, hash.PerSession
	none, cipp, cipr, cip := hash.AffinityNone, hash.AffinityClientIPPortProto, hash.AffinityClientIPProto, hash.AffinityClientIP
	tests := []row{
		// PER_CONNECTION column.
		{"PER_CONNECTION/NONE/TCP/5-tuple/same-flow", none, pc, RuleTCP, tcp(c, 1, ack), tcp(c, 1, ack), true},
		{"PER_CONNECTION/NONE/TCP/5-tuple/other-port", none, pc, RuleTCP, tcp(c, 1, ack), otherPort(tcp(c, 1, ack)), false},
		{"PER_CONNECTION/CLIENT_IP_PORT_PROTO/UDP/5-tuple/other-port", cipp, pc, RuleUDP, udp(c, 1), otherPort(udp(c, 1)), false},
		{"PER_CONNECTION/CLIENT_IP_PORT_PROTO/UDP-fragments/3-tuple", cipp, pc, RuleUDP, nonFirst(udp(c, 1)), nonFirst(otherPort(udp(c, 1))), true},
		{"PER_CONNECTION/CLIENT_IP_PORT_PROTO/ESP/3-tuple", cipp, pc, RuleL3Default, esp, esp, true},
		{"PER_CONNECTION/CLIENT_IP_PROTO/TCP/5-tuple/other-port", cipr, pc, RuleTCP, tcp(c, 1, ack), otherPort(tcp(c, 1, ack)), false},
		{"PER_CONNECTION/CLIENT_IP_PROTO/UDP/5-tuple/other-port", cipr, pc, RuleUDP, udp(c, 1), otherPort(udp(c, 1)), false},
		{"PER_CONNECTION/CLIENT_IP_PROTO/ESP/3-tuple", cipr, pc, RuleL3Default, esp, esp, true},
		{"PER_CONNECTION/CLIENT_IP/TCP/5-tuple/other-port", cip, pc, RuleTCP, tcp(c, 1, ack), otherPort(tcp(c, 1, ack)), false},
		{"PER_CONNECTION/CLIENT_IP/UDP/5-tuple/same-flow", cip, pc, RuleUDP, udp(c, 1), udp(c, 1), true},
		{"PER_CONNECTION/CLIENT_IP/ESP/3-tuple", cip, pc, RuleL3Default, esp, esp, true},
		// PER_SESSION column.
		{"PER_SESSION/NONE/TCP/5-tuple/other-port", none, ps, RuleTCP, tcp(c, 1, ack), otherPort(tcp(c, 1, ack)), false},
		{"PER_SESSION/NONE/TCP/5-tuple/same-flow", none, ps, RuleTCP, tcp(c, 1, ack), tcp(c, 1, ack), true},
		{"PER_SESSION/CLIENT_IP_PORT_PROTO/UDP/5-tuple/other-port", cipp, ps, RuleUDP, udp(c, 1), otherPort(udp(c, 1)), false},
		{"PER_SESSION/CLIENT_IP_PORT_PROTO/ESP/3-tuple", cipp, ps, RuleL3Default, esp, esp, true},
		{"PER_SESSION/CLIENT_IP_PROTO/TCP/3-tuple/other-port", cipr, ps, RuleTCP, tcp(c, 1, ack), otherPort(tcp(c, 1, ack)), true},
		{"PER_SESSION/CLIENT_IP_PROTO/UDP/3-tuple/other-port", cipr, ps, RuleUDP, udp(c, 1), otherPort(udp(c, 1)), true},
		{"PER_SESSION/CLIENT_IP_PROTO/TCP-vs-UDP/3-tuple/other-proto", cipr, ps, RuleL3Default, tcp(c, 1, ack), udp(c, 1), false},
		{"PER_SESSION/CLIENT_IP/TCP/2-tuple/other-port", cip, ps, RuleTCP, tcp(c, 1, ack), otherPort(tcp(c, 1, ack)), true},
		{"PER_SESSION/CLIENT_IP/TCP-vs-UDP/2-tuple/other-proto", cip, ps, RuleL3Default, tcp(c, 1, ack), udp(c, 7), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := ruleSpec{affinity: tt.affinity, mode: tt.mode, protocol: tt.protocol, allPorts: tt.protocol != RuleTCP}
			if got := tracked(t, spec, tt.first, tt.second); got != tt.shared {
				t.Errorf("second packet shared the entry: %v, want %v", got, tt.shared)
			}
		})
	}
}

// New or existing: the SYN rule in both modes.
func TestSYNRule(t *testing.T) {
	const c = "198.51.100.10"
	tests := []struct {
		name     string
		affinity hash.Affinity
		mode     hash.TrackingMode
		second   pkt
		reselect bool
	}{
		{"PER_CONNECTION/NONE/SYN-reselects", hash.AffinityNone, hash.PerConnection, tcp(c, 1, syn), true},
		{"PER_CONNECTION/CLIENT_IP/SYN-reselects", hash.AffinityClientIP, hash.PerConnection, tcp(c, 1, syn), true},
		{"PER_CONNECTION/NONE/SYN-ACK-is-looked-up", hash.AffinityNone, hash.PerConnection, tcp(c, 1, synack), false},
		{"PER_SESSION/NONE/SYN-reselects", hash.AffinityNone, hash.PerSession, tcp(c, 1, syn), true},
		{"PER_SESSION/CLIENT_IP_PORT_PROTO/SYN-reselects", hash.AffinityClientIPPortProto, hash.PerSession, tcp(c, 1, syn), true},
		{"PER_SESSION/CLIENT_IP_PROTO/SYN-is-looked-up", hash.AffinityClientIPProto, hash.PerSession, tcp(c, 2, syn), false},
		{"PER_SESSION/CLIENT_IP/SYN-is-looked-up", hash.AffinityClientIP, hash.PerSession, tcp(c, 3, syn), false},
		{"PER_CONNECTION/NONE/ACK-is-looked-up", hash.AffinityNone, hash.PerConnection, tcp(c, 1, ack), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := ruleSpec{affinity: tt.affinity, mode: tt.mode, protocol: RuleTCP}
			if got := !tracked(t, spec, tcp(c, 1, syn), tt.second); got != tt.reselect {
				t.Errorf("re-selected = %v, want %v", got, tt.reselect)
			}
		})
	}
}

// A SYN's entry, once re-selected, is the flow's entry: the handshake's
// ACK follows the SYN to the new backend.
func TestSYNReselectionIsRemembered(t *testing.T) {
	const c = "198.51.100.11"
	w := probeWorld(t, ruleSpec{protocol: RuleTCP})
	old := w.send(tcp(c, 9, syn))
	w.switchAll()
	if got := w.send(tcp(c, 9, syn)); got != fresh {
		t.Fatalf("SYN after switch went to %s", got)
	}
	w.setEligible(names(3), nil)
	if got := w.send(tcp(c, 9, ack)); got != fresh {
		t.Errorf("ACK went to %s, want %s (first SYN had gone to %s)", got, fresh, old)
	}
}

// Entry lifetime: idle expiry after idle_timeout, exactly at the boundary.
func TestIdleExpiry(t *testing.T) {
	const c = "198.51.100.12"
	for _, tt := range []struct {
		name  string
		after int // ticks after the last packet
		alive bool
	}{
		{"one-tick-before-60s", 60*16 - 1, true},
		{"at-60s", 60 * 16, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := probeWorld(t, ruleSpec{protocol: RuleTCP})
			b := w.send(tcp(c, 5, syn))
			w.send(tcp(c, 5, ack)) // the handshake's ACK confirms the entry
			w.advance(10 * 16)
			w.send(tcp(c, 5, ack)) // refreshes
			w.switchAll()
			w.advance(conntrackTicks(tt.after))
			got := w.send(tcp(c, 5, ack))
			if (got == b) != tt.alive {
				t.Errorf("after %d ticks idle went to %s (entry had %s): alive = %v, want %v", tt.after, got, b, got == b, tt.alive)
			}
		})
	}
}

// FIN and RST do not remove entries.
func TestFINAndRSTKeepEntries(t *testing.T) {
	const c = "198.51.100.13"
	for _, flags := range []uint8{fin, rst} {
		w := probeWorld(t, ruleSpec{protocol: RuleTCP})
		b := w.send(tcp(c, 6, syn))
		w.send(tcp(c, 6, flags))
		w.switchAll()
		if got := w.send(tcp(c, 6, ack)); got != b {
			t.Errorf("flags %#x: packet after went to %s, want %s", flags, got, b)
		}
	}
}

// Fragments without fragment_tracking: no reassembly; non-first fragments
// match only all-ports rules and hash by 3-tuple (2-tuple under CLIENT_IP).
func TestFragmentsWithoutTracking(t *testing.T) {
	const c = "198.51.100.14"
	nonFirst := udp(c, 7)
	nonFirst.frag, nonFirst.fragID = packet.FragNonFirst, 42
	t.Run("non-first-fragment-needs-all-ports-rule", func(t *testing.T) {
		w := newWorld(t, ruleSpec{protocol: RuleUDP, backends: names(3)})
		if got := w.send(nonFirst); got != "drop:no-rule" {
			t.Errorf("got %s, want drop:no-rule", got)
		}
	})
	t.Run("fragment-safe-recipe-keeps-datagram-and-flow-together", func(t *testing.T) {
		w := newWorld(t, ruleSpec{protocol: RuleUDP, allPorts: true, affinity: hash.AffinityClientIP, mode: hash.PerSession, backends: names(10)})
		for i := range 50 {
			src := clients(50)[i]
			whole := udp(src, 1000)
			first := udp(src, 1000)
			first.frag, first.fragID = packet.FragFirst, 1
			rest := first
			rest.frag = packet.FragNonFirst
			b := w.send(whole)
			if f, r := w.send(first), w.send(rest); f != b || r != b {
				t.Fatalf("client %s: datagram %s, first fragment %s, rest %s", src, b, f, r)
			}
		}
	})
	t.Run("5-tuple-affinity-fragments-follow-3-tuple", func(t *testing.T) {
		w := newWorld(t, ruleSpec{protocol: RuleUDP, allPorts: true, backends: names(10)})
		first := udp(c, 7)
		first.frag, first.fragID = packet.FragFirst, 42
		if got, want := w.send(first), w.maglev(nonFirst); got != want {
			t.Errorf("first fragment went to %s, the 3-tuple owner is %s", got, want)
		}
		if got, want := w.send(nonFirst), w.maglev(nonFirst); got != want {
			t.Errorf("non-first fragment went to %s, the 3-tuple owner is %s", got, want)
		}
	})
}

// Fragments with fragment_tracking: the datagram's fragments follow the
// first fragment to arrive, in any order, and the first fragment is placed
// like the flow's unfragmented datagrams (5-tuple).
func TestFragmentsWithTracking(t *testing.T) {
	const n = 200
	for _, order := range []string{"first-fragment-first", "non-first-fragment-first"} {
		t.Run(order, func(t *testing.T) {
			w := newWorld(t, ruleSpec{protocol: RuleUDP, allPorts: true, fragTrk: true, backends: names(10)})
			together, withFlow := 0, 0
			for i, src := range clients(n) {
				whole := udp(src, 2000)
				first := whole
				first.frag, first.fragID = packet.FragFirst, uint32(i)
				rest := first
				rest.frag = packet.FragNonFirst
				var f, r string
				if order == "first-fragment-first" {
					f, r = w.send(first), w.send(rest)
				} else {
					r, f = w.send(rest), w.send(first)
				}
				if f == r {
					together++
				}
				if f == w.maglev(whole) {
					withFlow++
				}
			}
			if together != n {
				t.Errorf("%d of %d datagrams stayed whole", together, n)
			}
			if order == "first-fragment-first" && withFlow != n {
				t.Errorf("%d of %d first fragments went where the flow's whole datagrams go", withFlow, n)
			}
		})
	}
}

// ICMP errors quoting a flow go to that flow's backend, tracked or not.
func TestICMPErrorFollowsFlow(t *testing.T) {
	const c = "198.51.100.15"
	w := probeWorld(t, ruleSpec{protocol: RuleTCP})
	b := w.send(tcp(c, 4242, syn))
	w.send(tcp(c, 4242, ack))
	w.switchAll()
	// The backend's reply VIP:80 → client:4242 was too big for a router.
	quoted := &packet.Tuple{Src: testVIP, Dst: addr16(c), SrcPort: 80, DstPort: 4242, Proto: packet.ProtoTCP}
	fragNeeded := pkt{src: "198.51.100.254", proto: packet.ProtoICMP, icmp: 3, inner: quoted}
	if got := w.send(fragNeeded); got != b {
		t.Errorf("frag-needed went to %s, the flow is on %s", got, b)
	}
	// Untracked flow: it goes where Maglev puts the flow.
	quoted2 := *quoted
	quoted2.DstPort = 4343
	fragNeeded.inner = &quoted2
	if got, want := w.send(fragNeeded), w.maglev(tcp(c, 4343, ack)); got != want {
		t.Errorf("frag-needed for an untracked flow went to %s, want %s", got, want)
	}
	// Quoting a packet that is not from a VIP: dropped.
	bogus := *quoted
	bogus.Src = addr16("198.18.9.9")
	fragNeeded.inner = &bogus
	if got := w.send(fragNeeded); got != "drop:icmp-not-for-flow" {
		t.Errorf("bogus error: %s", got)
	}
}

// Echo requests to a VIP without an L3_DEFAULT rule are answered by the
// appliance; with one, they go to its backends, hashed per packet
// (docs/design.md#icmp).
func TestEchoRequestAnswered(t *testing.T) {
	w := newWorld(t, ruleSpec{protocol: RuleTCP, backends: names(2)})
	echo := pkt{src: "198.51.100.16", proto: packet.ProtoICMP, icmp: 8}
	if d := w.snap.Decide(echo.meta(), w.q, w.now); d.Verdict != Reply {
		t.Errorf("echo request: %v %v, want reply", d.Verdict, d.Reason)
	}
	notVIP := echo
	notVIP.dst, notVIP.hasDst = addr16("203.0.113.99"), true
	if got := w.send(notVIP); got != "drop:icmp-unsupported" {
		t.Errorf("echo to a non-VIP: %s", got)
	}

	l3 := newWorld(t, ruleSpec{protocol: RuleL3Default, allPorts: true, backends: names(3)})
	seen := map[uint32]bool{}
	for i := range 64 {
		p := echo
		p.src = fmt.Sprintf("198.51.100.%d", 20+i)
		d := l3.snap.Decide(p.meta(), l3.q, l3.now)
		if d.Verdict != Tx || d.Tracked {
			t.Fatalf("echo to an L3_DEFAULT VIP: %v %v tracked=%v, want Tx untracked", d.Verdict, d.Reason, d.Tracked)
		}
		seen[d.Backend] = true
	}
	if len(seen) != 3 {
		t.Errorf("echoes from 64 clients reached %d of 3 backends", len(seen))
	}
}

// PER_SESSION 2- and 3-tuple sessions span a client's connections, which
// RSS spreads over queues: a session placed by one worker is honoured by
// another.
func TestPerSessionAcrossQueues(t *testing.T) {
	const c = "198.51.100.17"
	for _, aff := range []hash.Affinity{hash.AffinityClientIP, hash.AffinityClientIPProto} {
		w := probeWorld(t, ruleSpec{affinity: aff, mode: hash.PerSession, protocol: RuleTCP})
		b := w.send(tcp(c, 1000, syn))
		w.switchAll()
		other := *w.q
		ct, err := newTable()
		if err != nil {
			t.Fatal(err)
		}
		other.Conntrack = ct // a second worker: own flow table, shared tables
		d := w.snap.Decide(tcp(c, 2000, syn).meta(), &other, w.now)
		if d.Verdict != Tx || w.rule.Backends[d.Backend].Name != b {
			t.Errorf("affinity %d: second connection on another queue went to slot %d (%v), want %s", aff, d.Backend, d.Verdict, b)
		}
	}
}
