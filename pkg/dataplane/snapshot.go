package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/encap"
)

// Backend is what the workers know of one backend of one rule. Its index
// in Rule.Backends is the rule-scoped backend slot: the ID stored in the
// rule's Maglev table and in conntrack entries. The control plane keeps a
// backend's slot for as long as the backend is configured (and draining),
// so entries survive snapshot swaps. The fields a packet reads (Template,
// Present, the generations) come first.
type Backend struct {
	// Template is the precomputed encapsulation towards this backend (or
	// the MAC rewrite for DIRECT). Nil while the backend's next hop is not
	// resolved: the control plane keeps such a backend out of the eligible
	// set, and a tracked flow to it is dropped (no-next-hop) until it is.
	Template *encap.Template
	Present  bool // the slot is in use

	// The backend's generations, copied from its failover.BackendState
	// (see the failover package's "Conntrack validity"). A conntrack entry
	// records UnhealthyGen and DrainGen when it is created (packed as
	// Stamp); it is honoured while
	//   (its UnhealthyGen is current, or the rule says the flow persists
	//    on an unhealthy backend)
	//   and (its DrainGen is current, or it is not older than DrainFloor
	//    and now is before DrainUntil).
	// So entries dropped while the backend was unhealthy stay dropped
	// after it recovers, replacement entries survive its recovery, and a
	// drained or removed backend's entries end at the draining deadline.
	// failover.Gens.Valid is that rule; the generations are 16 bits wide
	// in entries and compared wrap-safe (see failover.Gens).
	UnhealthyGen uint16
	DrainGen     uint16
	DrainFloor   uint16
	DrainUntil   conntrack.Time

	Name string   // the address as text: the backend's fleet-wide identity
	Addr [16]byte // IPv4 mapped into IPv6
}

// ProtoSet is a set of IP protocol numbers, one bit each (32 bytes).
type ProtoSet [4]uint64

// Has reports whether p is in the set.
func (s *ProtoSet) Has(p uint8) bool { return s[p>>6]&(1<<(p&63)) != 0 }

// Set puts p in the set (in == true) or takes it out.
func (s *ProtoSet) Set(p uint8, in bool) {
	if in {
		s[p>>6] |= 1 << (p & 63)
	} else {
		s[p>>6] &^= 1 << (p & 63)
	}
}

// Rule is one forwarding rule as the workers see it. Its first cache line
// holds every field a packet of the rule reads on a tracked hit or a miss
// (TestRuleHotFields); Persist, read only when a backend's health
// generation moved, comes next, and what only the control plane reads
// last.
type Rule struct {
	// Backends holds the rule's backends by slot.
	Backends []Backend
	// Table is the weighted Maglev table over the eligible set; its IDs are
	// indexes into Backends. Empty when nothing is eligible.
	Table *hash.MaglevTable
	// zones maps client prefixes to their zone's table (zonal affinity);
	// nil when zonal affinity is off.
	zones *[]zonePrefix
	// Sources is the rule's source_ranges: a packet from elsewhere is
	// dropped (ReasonSourceRange) before anything else is looked at; nil
	// admits every source.
	Sources *SourceSet
	// FlushGen changes when the rule's entries must all be forgotten (a
	// failover tier switch with connection_drain_on_failover = false).
	FlushGen uint32
	Idle     conntrack.Ticks
	Affinity hash.Affinity
	Mode     hash.TrackingMode
	// FragmentTracking remembers each datagram's backend so all its
	// fragments follow the first one to arrive (docs/design.md#fragments).
	FragmentTracking bool
	Present          bool

	// Persist says whether flows of an IP protocol stay on a backend that
	// became unhealthy (the table of
	// docs/design.md#persistence-on-unhealthy-backends, evaluated for this
	// rule's mode and affinity).
	Persist ProtoSet

	Name  string
	Match RuleMatch

	// placement is the rule's part of Snapshot.Placement, set when a
	// snapshot first takes the rule.
	placement uint64
}

// Snapshot is everything the workers read that can change. It is built by
// the control plane, published with one atomic pointer swap, and never
// modified afterwards, so workers read it without locks.
//
// Rules is a table of pointers: a snapshot that follows another shares
// every rule that did not change (NextSnapshot), so a change costs the
// rules it touches and this table, not a copy of every rule.
type Snapshot struct {
	Seed  uint64  // the fleet-wide hash seed
	Rules []*Rule // indexed by the stable rule slot; an absent slot's rule has Present false

	matcher     *Matcher
	ruleOfMatch []uint16 // matcher index → rule slot
	placement   uint64   // Placement
}

// absentRule fills the slots without a rule, so Rules[slot].Present is
// always safe to read.
var absentRule = &Rule{}

// NewSnapshot indexes rules for matching: nil entries and rules with
// Present false are allowed and stay unmatched. The snapshot owns rules
// from now on; neither the slice nor the rules may change afterwards.
func NewSnapshot(seed uint64, rules []*Rule) (*Snapshot, error) {
	return NextSnapshot(nil, seed, rules)
}

// NextSnapshot is NewSnapshot for the snapshot that follows prev (nil:
// none). A rule that is prev's rule of the same slot (the same pointer)
// was checked when prev was built and is not checked again, and prev's
// matcher is kept when no slot's presence, match or source ranges changed
// (a VIP's echo requests are admitted by its rules' ranges): the cost is
// one pass over the pointer table plus the rules that changed.
func NextSnapshot(prev *Snapshot, seed uint64, rules []*Rule) (*Snapshot, error) {
	if len(rules) > 1<<16 {
		return nil, fmt.Errorf("new snapshot: %d rules, at most 65536", len(rules))
	}
	s := &Snapshot{Seed: seed, Rules: rules}
	sameMatch := prev != nil
	if prev != nil && len(prev.Rules) > len(rules) {
		for _, r := range prev.Rules[len(rules):] {
			sameMatch = sameMatch && !r.Present
		}
	}
	for i, r := range rules {
		if r == nil {
			r, rules[i] = absentRule, absentRule
		}
		old := absentRule
		if prev != nil && i < len(prev.Rules) {
			old = prev.Rules[i]
		}
		if r == old {
			continue
		}
		if r.Present {
			if err := r.check(); err != nil {
				return nil, fmt.Errorf("new snapshot: %w", err)
			}
			r.placement = r.placementOf(uint16(i))
		}
		if r.Present != old.Present || r.Present && (!r.Match.equal(&old.Match) || !r.Sources.same(old.Sources)) {
			sameMatch = false // the matcher, or a VIP's echo sources, differ
		}
	}
	if sameMatch {
		s.matcher, s.ruleOfMatch = prev.matcher, prev.ruleOfMatch
	} else {
		var ms []RuleMatch
		for i, r := range rules {
			if r.Present {
				ms = append(ms, r.Match)
				s.ruleOfMatch = append(s.ruleOfMatch, uint16(i))
			}
		}
		m, err := NewMatcher(ms)
		if err != nil {
			return nil, fmt.Errorf("new snapshot: %w", err)
		}
		if err := m.setEchoSources(rules, s.ruleOfMatch); err != nil {
			return nil, fmt.Errorf("new snapshot: %w", err)
		}
		s.matcher = m
	}
	s.placement = mix(0, seed)
	for _, r := range rules {
		if r.Present {
			s.placement += r.placement
		}
	}
	return s, nil
}

// check verifies that every member of the rule's tables has a backend.
func (r *Rule) check() error {
	if r.Table == nil {
		return fmt.Errorf("rule %q has no Maglev table", r.Name)
	}
	tables := []*hash.MaglevTable{r.Table}
	if r.zones != nil {
		for _, z := range *r.zones {
			tables = append(tables, z.table)
		}
	}
	for _, t := range tables {
		for _, b := range t.Backends() {
			if int(b.ID) >= len(r.Backends) || !r.Backends[b.ID].Present {
				return fmt.Errorf("rule %q: Maglev backend %s has slot %d with no backend", r.Name, b.Name, b.ID)
			}
		}
	}
	return nil
}

// equal reports whether two matches match the same packets.
func (m *RuleMatch) equal(o *RuleMatch) bool {
	return m.VIP == o.VIP && m.Protocol == o.Protocol && m.AllPorts == o.AllPorts && slices.Equal(m.Ports, o.Ports)
}

// Matcher returns the snapshot's rule matcher.
func (s *Snapshot) Matcher() *Matcher { return s.matcher }

// ZoneTable is one client prefix of a rule's zonal affinity and the Maglev
// table its clients use.
type ZoneTable struct {
	Prefix netip.Prefix // in the IPv4-mapped form for IPv4 clients
	Table  *hash.MaglevTable
}

// ZoneTables returns the rule's zonal tables in match order (longest prefix
// first); nil when zonal affinity is off. For digests and tools: the packet
// path uses the unexported form.
func (r *Rule) ZoneTables() []ZoneTable {
	if r.zones == nil {
		return nil
	}
	var out []ZoneTable
	for _, z := range *r.zones {
		var a [16]byte
		binary.BigEndian.PutUint64(a[0:8], z.hi)
		binary.BigEndian.PutUint64(a[8:16], z.lo)
		out = append(out, ZoneTable{Prefix: netip.PrefixFrom(netip.AddrFrom16(a), z.bits), Table: z.table})
	}
	return out
}

// gens is what the validity rule reads of b.
func (b *Backend) gens() failover.Gens {
	return failover.Gens{UnhealthyGen: b.UnhealthyGen, DrainGen: b.DrainGen, DrainFloor: b.DrainFloor}
}

// Stamp is what a new entry to b records: its generations, packed into
// the entry's 32-bit backend generation.
func (b *Backend) Stamp() uint32 { return uint32(b.gens().Stamp()) }

// valid reports whether a tracked value still holds for a packet of proto
// at now (the O(1) invalidation of docs/design.md#entry-lifetime): the
// rule's flush generation, then failover's rule on the backend's
// generations.
func (r *Rule) valid(v conntrack.Value, proto uint8, now conntrack.Time) bool {
	if v.RuleGen != r.FlushGen || int(v.Backend) >= len(r.Backends) {
		return false
	}
	b := &r.Backends[v.Backend]
	if !b.Present {
		return false
	}
	// Most hits carry the current stamp: then neither the persistence bit
	// nor the drain floor and deadline are read.
	s := failover.Stamp(v.BackendGen)
	if (failover.Gens{UnhealthyGen: b.UnhealthyGen, DrainGen: b.DrainGen}).Current(s) {
		return true
	}
	return b.gens().Valid(s, r.Persist.Has(proto), now.Before(b.DrainUntil))
}
