package dataplane

import (
	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/packet"
)

// EntryFinder reports the conntrack value stored for key under rule slot
// rule: in the shared PER_SESSION table when shared is true, else in the
// per-queue tables. It must not change the tables.
type EntryFinder func(key *hash.Key, rule uint16, shared bool) (v conntrack.Value, found bool)

// Explanation is how Decide places one flow, step by step, for `xlb
// lookup`. It is built off the packet path and allocates as it likes.
type Explanation struct {
	Matched bool   // a rule of the snapshot matches the packet
	Rule    uint16 // its slot

	Selection hash.Key // the key whose hash selects the backend
	Hash      uint64   // Sum64(Selection, seed)
	Slot      uint32   // the Maglev slot the hash falls into

	Tracking      hash.Key // zero when not Trackable
	Trackable     bool
	Shared        bool // tracked in the shared PER_SESSION table
	NewConnection bool // a SYN that re-selects: any entry is ignored

	EntryFound bool            // a tracked entry exists
	Entry      conntrack.Value // its value, when EntryFound
	EntryValid bool            // and it still holds (generations, drain deadline, flush)

	MaglevBackend uint32 // the backend the Maglev table gives
	MaglevOK      bool   // false: the eligible set is empty

	Decision Decision // what Decide returns for this packet given the entry
}

// Explain mirrors Decide for one packet that is neither an ICMP message
// nor a fragment (those follow other paths; Explain reports them
// unmatched), using find instead of the worker's tables, and changes
// nothing. Decide stays the reference: tests hold the two to the same
// answer.
func (s *Snapshot) Explain(m *packet.Meta, now conntrack.Time, find EntryFinder) Explanation {
	var x Explanation
	if m.Frag != packet.FragNone || m.Proto == packet.ProtoICMP || m.Proto == packet.ProtoICMPv6 {
		x.Decision = drop(ReasonNoRule)
		return x
	}
	hasPort := m.Proto == packet.ProtoTCP || m.Proto == packet.ProtoUDP
	mi := s.matcher.Match(&m.Dst, m.Proto, m.DstPort, hasPort)
	if mi < 0 {
		x.Decision = drop(ReasonNoRule)
		return x
	}
	x.Matched = true
	x.Rule = s.ruleOfMatch[mi]
	r := &s.Rules[x.Rule]

	x.Selection.SetSelection(m, r.Affinity)
	x.Hash = hash.Sum64(&x.Selection, s.Seed)
	tbl := r.zoneTable(&m.Src) // the client's zone view under zonal affinity
	x.Slot = tbl.Slot(x.Hash)
	x.MaglevBackend, x.MaglevOK = tbl.Lookup(x.Hash)

	x.Trackable = x.Tracking.SetTracking(m, r.Affinity, r.Mode)
	x.Shared = x.Trackable && r.Mode == hash.PerSession && x.Tracking.Kind != hash.Tuple5
	x.NewConnection = isNewConnection(r, m)
	if x.Trackable && find != nil {
		x.Entry, x.EntryFound = find(&x.Tracking, x.Rule, x.Shared)
		x.EntryValid = x.EntryFound && r.valid(x.Entry, m.Proto, now)
	}
	switch {
	case x.Trackable && !x.NewConnection && x.EntryValid:
		x.Decision = Decision{Verdict: Tx, Rule: x.Rule, Backend: x.Entry.Backend, Tracked: true}
	case x.MaglevOK:
		x.Decision = Decision{Verdict: Tx, Rule: x.Rule, Backend: x.MaglevBackend, Hash: x.Hash}
	default:
		x.Decision = drop(ReasonNoBackend)
	}
	return x
}

// EntryValid reports whether a tracked value of rule slot rule, for a
// flow of IP protocol proto, would still decide at now (Decide's check:
// flush generation, unhealthy generation unless the flow persists, drain
// deadline). For listings and counts off the packet path.
func (s *Snapshot) EntryValid(rule uint16, v conntrack.Value, proto uint8, now conntrack.Time) bool {
	if int(rule) >= len(s.Rules) || !s.Rules[rule].Present {
		return false
	}
	return s.Rules[rule].valid(v, proto, now)
}
