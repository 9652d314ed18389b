package dataplane

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/packet"
)

const testSeed = 0x5eed

var testVIP = addr16("203.0.113.10")

// pkt builds the Meta of a packet from client src:sport to the VIP.
type pkt struct {
	src     string
	sport   uint16
	dport   uint16
	proto   uint8
	flags   uint8
	frag    packet.FragState
	fragID  uint32
	dst     [16]byte
	icmp    uint8 // ICMP type
	hasDst  bool
	inner   *packet.Tuple
	family6 bool
}

func (p pkt) meta() *packet.Meta {
	m := &packet.Meta{Family: packet.IPv4}
	if p.family6 {
		m.Family = packet.IPv6
	}
	m.Src = addr16(p.src)
	m.Dst = testVIP
	if p.hasDst {
		m.Dst = p.dst
	}
	m.Proto = p.proto
	m.Frag, m.FragID = p.frag, p.fragID
	if p.frag != packet.FragNonFirst && (p.proto == packet.ProtoTCP || p.proto == packet.ProtoUDP) {
		m.SrcPort, m.DstPort = p.sport, p.dport
	}
	if p.proto == packet.ProtoTCP {
		m.TCPFlags = p.flags
	}
	if p.proto == packet.ProtoICMP || p.proto == packet.ProtoICMPv6 {
		m.ICMPType = p.icmp
		if p.inner != nil {
			m.Inner, m.HasInner = *p.inner, true
		}
	}
	return m
}

const (
	syn    = packet.TCPFlagSYN
	ack    = packet.TCPFlagACK
	synack = packet.TCPFlagSYN | packet.TCPFlagACK
	fin    = packet.TCPFlagFIN | packet.TCPFlagACK
	rst    = packet.TCPFlagRST
)

func tcp(src string, sport uint16, flags uint8) pkt {
	return pkt{src: src, sport: sport, dport: 80, proto: packet.ProtoTCP, flags: flags}
}

func udp(src string, sport uint16) pkt {
	return pkt{src: src, sport: sport, dport: 53, proto: packet.ProtoUDP}
}

// ruleSpec describes a test rule: its policy and its backends; eligible
// names the backends in the Maglev table (all when nil) and weights their
// weights (equal when nil).
type ruleSpec struct {
	affinity hash.Affinity
	mode     hash.TrackingMode
	protocol RuleProtocol
	allPorts bool
	fragTrk  bool
	persist  func(proto uint8) bool
	backends []string
	eligible []string
	weights  map[string]uint32
	idle     conntrack.Ticks
	sources  []string // source_ranges; nil admits every source
}

// world is a snapshot under test plus one worker's queue.
type world struct {
	t    *testing.T
	spec ruleSpec
	snap *Snapshot
	q    *FlowTables
	now  conntrack.Time
	rule Rule
}

func newWorld(t *testing.T, spec ruleSpec) *world {
	t.Helper()
	ct, err := conntrack.New(1<<12, 1)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := conntrack.NewShared(1<<12, 2)
	if err != nil {
		t.Fatal(err)
	}
	frags, err := conntrack.NewShared(1<<10, 3)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, spec: spec, q: &FlowTables{Conntrack: ct, Sessions: sess, Fragments: frags}, now: 1000}
	if spec.idle == 0 {
		spec.idle = conntrack.DefaultIdle
		w.spec.idle = spec.idle
	}
	r := Rule{
		Name: "test", Present: true,
		Match:            RuleMatch{VIP: testVIP, Protocol: spec.protocol, AllPorts: spec.allPorts, Ports: []PortRange{{53, 53}, {80, 80}}},
		Affinity:         spec.affinity,
		Mode:             spec.mode,
		Idle:             spec.idle,
		FragmentTracking: spec.fragTrk,
	}
	if spec.protocol == RuleL3Default {
		r.Match.AllPorts = true
	}
	r.Sources = mustSources(t, spec.sources...)
	for p := range 256 {
		if spec.persist != nil {
			r.Persist.Set(uint8(p), spec.persist(uint8(p)))
		} else {
			r.Persist.Set(uint8(p), uint8(p) == packet.ProtoTCP)
		}
	}
	for _, name := range spec.backends {
		r.Backends = append(r.Backends, Backend{Name: name, Addr: addr16(name), Present: true})
	}
	w.rule = r
	w.setEligible(spec.eligible, spec.weights)
	return w
}

// mustSources builds the source set of prefixes (nil for none).
func mustSources(t testing.TB, prefixes ...string) *SourceSet {
	t.Helper()
	var ps []netip.Prefix
	for _, p := range prefixes {
		ps = append(ps, netip.MustParsePrefix(p))
	}
	s, err := NewSourceSet(ps)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// slotOf returns the backend slot of name.
func (w *world) slotOf(name string) uint32 {
	for i, b := range w.rule.Backends {
		if b.Name == name {
			return uint32(i)
		}
	}
	w.t.Fatalf("no backend %s", name)
	return 0
}

// setEligible rebuilds the rule's Maglev table over names (all backends
// when nil, none when empty) and publishes a new snapshot.
func (w *world) setEligible(names []string, weights map[string]uint32) {
	w.t.Helper()
	if names == nil {
		names = w.spec.backends
	}
	var bs []hash.Backend
	for _, n := range names {
		wt := uint32(1)
		if weights != nil {
			wt = weights[n]
		}
		bs = append(bs, hash.Backend{Name: n, ID: w.slotOf(n), Weight: wt})
	}
	tbl, err := hash.Build(bs, 65537, testSeed)
	if err != nil {
		w.t.Fatal(err)
	}
	w.rule.Table = tbl
	w.publish()
}

// publish makes a snapshot of w.rule (after a test changed its state).
func (w *world) publish() {
	w.t.Helper()
	r := w.rule
	r.Backends = append([]Backend(nil), w.rule.Backends...)
	s, err := NewSnapshot(testSeed, []*Rule{&r})
	if err != nil {
		w.t.Fatal(err)
	}
	w.snap = s
}

// backend mutates backend name's state and republishes.
func (w *world) backend(name string, f func(b *Backend)) {
	f(&w.rule.Backends[w.slotOf(name)])
	w.publish()
}

func (w *world) advance(d conntrack.Ticks) { w.now = w.now.Add(d) }

// send decides p and returns the backend's name ("" with the decision when
// it was not Tx).
func (w *world) send(p pkt) string {
	w.t.Helper()
	d := w.snap.Decide(p.meta(), w.q, w.now)
	if d.Verdict != Tx {
		return fmt.Sprintf("%s:%s", d.Verdict, d.Reason)
	}
	return w.rule.Backends[d.Backend].Name
}

// maglev returns the backend a fresh Maglev lookup picks for p.
func (w *world) maglev(p pkt) string {
	k := hash.SelectionKey(p.meta(), w.spec.affinity)
	id, ok := w.snap.Rules[0].Table.Lookup(hash.Sum64(&k, testSeed))
	if !ok {
		return "none"
	}
	return w.rule.Backends[id].Name
}

// ten returns backend names 10.0.0.1 … 10.0.0.n (as 192.0.2.x: test range).
func names(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}).String())
	}
	return out
}

// clients returns n distinct client addresses in 198.51.100.0/24 and
// 198.18.0.0/15.
func clients(n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}).String())
	}
	return out
}
