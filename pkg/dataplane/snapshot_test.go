package dataplane

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/packet"
)

// snapRule is a TCP rule on 203.0.113.<vip>:80 over the named backends.
func snapRule(t testing.TB, name string, vip byte, backends ...string) *Rule {
	t.Helper()
	r := &Rule{Name: name, Present: true, Match: RuleMatch{VIP: addr16(fmt.Sprintf("203.0.113.%d", vip)), Protocol: RuleTCP, Ports: []PortRange{{80, 80}}}}
	var bs []hash.Backend
	for i, b := range backends {
		r.Backends = append(r.Backends, Backend{Name: b, Addr: addr16(b), Present: true})
		bs = append(bs, hash.Backend{Name: b, ID: uint32(i), Weight: 1})
	}
	tbl, err := hash.Build(bs, 1031, testSeed)
	if err != nil {
		t.Fatal(err)
	}
	r.Table = tbl
	return r
}

// snapTables is a worker's empty flow tables.
func snapTables(t testing.TB) *FlowTables {
	ct, err := conntrack.New(1<<10, 1)
	if err != nil {
		t.Fatal(err)
	}
	return &FlowTables{Conntrack: ct}
}

// TestNextSnapshotShares: a snapshot that follows another with one rule
// replaced shares every other rule and the matcher, places the changed
// rule's flows with its new table, and has the Placement a snapshot built
// from scratch of the same rules has.
func TestNextSnapshotShares(t *testing.T) {
	a, b := snapRule(t, "a", 10, "10.0.0.1", "10.0.0.2"), snapRule(t, "b", 11, "10.0.1.1")
	first, err := NewSnapshot(testSeed, []*Rule{a, nil, b})
	if err != nil {
		t.Fatal(err)
	}
	if first.Rules[1].Present {
		t.Fatal("a nil slot is present")
	}
	b2 := snapRule(t, "b", 11, "10.0.1.1", "10.0.1.2")
	next, err := NextSnapshot(first, testSeed, []*Rule{a, nil, b2})
	if err != nil {
		t.Fatal(err)
	}
	if next.Rules[0] != a || next.Matcher() != first.Matcher() {
		t.Error("the unchanged rule or the matcher was not shared")
	}
	p := tcp("198.51.100.1", 4000, syn)
	p.dst, p.hasDst = addr16("203.0.113.11"), true
	if d := next.Decide(p.meta(), snapTables(t), 1); d.Verdict != Tx || next.Rules[d.Rule] != b2 {
		t.Errorf("b's flow: %+v, want its new backend", d)
	}
	scratch, err := NewSnapshot(testSeed, []*Rule{a, nil, b2})
	if err != nil {
		t.Fatal(err)
	}
	if next.Placement() != scratch.Placement() || next.Placement() == first.Placement() {
		t.Errorf("placements: first %x, next %x, from scratch %x", first.Placement(), next.Placement(), scratch.Placement())
	}
	same, _ := NextSnapshot(next, testSeed, []*Rule{a, nil, b2})
	if same.Placement() != next.Placement() {
		t.Error("the same rules changed the placement")
	}

	// A changed match, a new rule or a removed one builds a new matcher.
	for _, tc := range []struct {
		name  string
		rules []*Rule
		vip   string // now matched
	}{
		{"port changed", []*Rule{a, nil, func() *Rule { r := *b2; r.Match.Ports = []PortRange{{81, 81}}; return &r }()}, ""},
		{"rule added", []*Rule{a, snapRule(t, "c", 12, "10.0.2.1"), b2}, "203.0.113.12"},
		{"rule removed", []*Rule{a}, ""},
	} {
		s, err := NextSnapshot(next, testSeed, tc.rules)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if s.Matcher() == next.Matcher() {
			t.Errorf("%s: matcher shared", tc.name)
		}
		p := tcp("198.51.100.1", 4000, syn)
		p.dst, p.hasDst = addr16("203.0.113.11"), true
		if tc.vip != "" {
			p.dst = addr16(tc.vip)
		}
		if d := s.Decide(p.meta(), snapTables(t), 1); (d.Verdict == Tx) != (tc.vip != "") {
			t.Errorf("%s: %+v", tc.name, d)
		}
	}
}

// TestNextSnapshotSourceRanges: a rule rebuilt with the same source
// ranges keeps the matcher; new ranges build it again, so a VIP's echo
// requests follow its rules' ranges (the matcher holds their union).
func TestNextSnapshotSourceRanges(t *testing.T) {
	ranged := func(prefixes ...string) *Rule {
		r := snapRule(t, "a", 10, "10.0.0.1")
		var ps []netip.Prefix
		for _, p := range prefixes {
			ps = append(ps, netip.MustParsePrefix(p))
		}
		src, err := NewSourceSet(ps)
		if err != nil {
			t.Fatal(err)
		}
		r.Sources = src
		return r
	}
	first, err := NewSnapshot(testSeed, []*Rule{ranged("198.51.100.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	same, err := NextSnapshot(first, testSeed, []*Rule{ranged("198.51.100.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	if same.Matcher() != first.Matcher() {
		t.Error("the same ranges built the matcher again")
	}
	echo := pkt{src: "192.0.2.9", proto: packet.ProtoICMP, icmp: 8, dst: addr16("203.0.113.10"), hasDst: true}
	if d := same.Decide(echo.meta(), snapTables(t), 1); d.Verdict != Drop || d.Reason != ReasonSourceRange {
		t.Errorf("an echo from outside the ranges: %+v", d)
	}
	wider, err := NextSnapshot(same, testSeed, []*Rule{ranged("198.51.100.0/24", "192.0.2.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	if wider.Matcher() == same.Matcher() {
		t.Error("new ranges kept the matcher")
	}
	if d := wider.Decide(echo.meta(), snapTables(t), 1); d.Verdict != Reply {
		t.Errorf("an echo from a source the new ranges admit: %+v", d)
	}
}

// TestNextSnapshotChecksChangedRules: a changed rule whose table names a
// slot without a backend is refused as NewSnapshot refuses it.
func TestNextSnapshotChecksChangedRules(t *testing.T) {
	a := snapRule(t, "a", 10, "10.0.0.1")
	first, err := NewSnapshot(testSeed, []*Rule{a})
	if err != nil {
		t.Fatal(err)
	}
	bad := snapRule(t, "a", 10, "10.0.0.1", "10.0.0.2")
	bad.Backends = bad.Backends[:1]
	for _, prev := range []*Snapshot{nil, first} {
		if _, err := NextSnapshot(prev, testSeed, []*Rule{bad}); err == nil || !strings.Contains(err.Error(), "slot 1 with no backend") {
			t.Errorf("after %v: %v", prev != nil, err)
		}
	}
}

// BenchmarkNextSnapshot: one rule of N replaced; the cost is the pointer
// table and that rule.
func BenchmarkNextSnapshot(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			rules := make([]*Rule, n)
			for i := range rules {
				rules[i] = snapRule(b, fmt.Sprint(i), byte(i), "10.0.0.1")
				rules[i].Match.Ports = []PortRange{{uint16(80 + i/256), uint16(80 + i/256)}}
			}
			prev, err := NewSnapshot(testSeed, rules)
			if err != nil {
				b.Fatal(err)
			}
			alt := [2]*Rule{rules[n/2], snapRule(b, "x", byte(n/2), "10.0.0.2")}
			alt[1].Match = rules[n/2].Match
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				next := append([]*Rule(nil), prev.Rules...)
				next[n/2] = alt[(i+1)%2]
				if prev, err = NextSnapshot(prev, testSeed, next); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
