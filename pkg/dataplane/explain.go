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

// trace is what Explain passes down decideFlow: the entry comes from find
// instead of the worker's tables, each step is recorded in x, and nothing
// is changed.
type trace struct {
	find EntryFinder
	x    *Explanation
}

// entry records f's tracked entry, if any, and reports whether it is
// valid. The entry is looked for even when it cannot decide (a SYN that
// re-selects), so the explanation shows what the SYN overrides.
func (tr *trace) entry(r *Rule, f *flow, proto uint8, now conntrack.Time) bool {
	x := tr.x
	x.Tracking, x.Trackable, x.Shared, x.NewConnection = f.key, f.trackable, f.shared, f.trackable && !f.lookup
	if f.trackable && tr.find != nil {
		// The finder gets a copy: f must not escape to the heap (Decide
		// shares decideFlow, and f lives on its stack).
		k := f.key
		x.Entry, x.EntryFound = tr.find(&k, f.slot, f.shared)
		x.EntryValid = x.EntryFound && r.valid(x.Entry, proto, now)
	}
	return x.EntryValid
}

// Explain runs Decide's own decision (decideFlow) for one packet that is
// neither an ICMP message nor a fragment (those follow other paths;
// Explain reports them unmatched), with find in place of the worker's
// tables and a trace of each step, and changes nothing. It also reports
// the Maglev choice when an entry decided, for the operator's benefit.
func (s *Snapshot) Explain(m *packet.Meta, now conntrack.Time, find EntryFinder) Explanation {
	var x Explanation
	if m.Frag != packet.FragNone || m.Proto == packet.ProtoICMP || m.Proto == packet.ProtoICMPv6 {
		x.Decision = drop(ReasonNoRule)
		return x
	}
	var f flow
	s.prepare(m, nil, &f)
	if f.denied {
		x.Matched, x.Rule = true, f.slot
		x.Decision = s.finish(m, nil, now, &f)
		return x
	}
	if f.path != pathFlow {
		x.Decision = Decision{Verdict: f.done, Reason: f.reason}
		return x
	}
	x.Matched = true
	x.Rule = f.slot
	r := s.Rules[x.Rule]
	x.Decision = s.decideFlowAs(r, m, nil, now, &f, false, &trace{find: find, x: &x})

	x.Selection.SetSelection(m, r.Affinity)
	x.Hash = hash.Sum64(&x.Selection, s.Seed)
	tbl := r.zoneTable(&m.Src) // the client's zone view under zonal affinity
	x.Slot = tbl.Slot(x.Hash)
	x.MaglevBackend, x.MaglevOK = tbl.Lookup(x.Hash)
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
