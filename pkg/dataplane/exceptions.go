package dataplane

import (
	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/spsc"
)

// Fleet flow-state sharing, the worker's side (see pkg/fleet for the
// rest). An exception is a tracked flow whose backend is not what its
// rule's Maglev table picks for it now: the only kind of flow that a peer
// appliance, computing the same tables, would not put back where it is if
// the routers moved it there. Every placement xlb makes is the table's
// pick (failover, draining, zones, preferred groups and weights are all
// in the tables), so a flow becomes an exception only when the tables
// change under it; and an entry copied from a peer (Snapshot.fromPeer) is
// one when it arrives. Each worker therefore scans its own table, a few
// buckets between batches, and hands what it finds to the fleet sender
// through a bounded lock-free ring:
//
//   - after the snapshot's placement changed (Placement: any rule's table
//     or zone tables), a pass over every live entry, which judges each
//     one (its rule's pick against its backend, valid entries only) and
//     sets or clears conntrack.MarkException;
//   - every refresh interval otherwise, a pass over the marked entries
//     only (header lines, and the slot line of a marked entry), which
//     judges them again (a SYN that re-selected, or an entry that went
//     stale, is no exception any more) and hands the rest over with their
//     time to live;
//   - the end of each pass is handed over too, so the sender knows which
//     of its exceptions the pass did not see again (expired, flushed).
//
// A full ring never blocks the worker and loses nothing: the scan stops at
// the entry it could not hand over and resumes there after the next batch
// (counted by the ring's Full). Nothing of this runs on the packet path.

// Sighting is one item a worker's exception scan hands to the fleet
// sender: an exception (Key, Rule, Value, ExpiresIn as of the scan), or the
// end of pass Pass (End; the other fields zero).
type Sighting struct {
	Key       hash.Key
	Value     conntrack.Value
	ExpiresIn conntrack.Ticks
	Pass      uint32
	Rule      uint16
	End       bool
}

// A worker scans scanBudget buckets for exceptions per loop that received
// packets, and idleScanBudget per loop that received none.
const (
	scanBudget     = 32
	idleScanBudget = 2048
)

// exceptionScan is one worker's scan state; only the worker touches it.
type exceptionScan struct {
	out     *spsc.Ring[Sighting]
	refresh conntrack.Ticks
	visit   conntrack.ScanVisitor // judge, bound once (no allocation per call)

	snap *Snapshot      // what judge compares with: the batch's snapshot
	now  conntrack.Time // and its clock

	cursor      int
	running     bool
	all         bool   // this pass judges every live entry
	pass        uint32 // the current (or last) pass
	passPlaced  uint64 // the placement this pass started under
	placed      uint64 // the placement of the last pass over every entry
	judged      bool   // such a pass has completed
	nextRefresh conntrack.Time
	endPending  bool // the last pass's end is not handed over yet
}

// ShareExceptions makes the worker scan its table for exceptions and hand
// them to out, the fleet sender's ring for this queue, passing over its
// marked entries every refresh (the sender's refresh interval) and over
// every entry whenever the snapshot's placement changes. Call it before
// Run.
func (w *Worker) ShareExceptions(out *spsc.Ring[Sighting], refresh conntrack.Ticks) {
	s := &exceptionScan{out: out, refresh: max(refresh, 1)}
	s.visit = s.judge
	w.scan = s
}

// step runs the scan for at most budget buckets (worker only, between
// batches).
func (s *exceptionScan) step(ct *conntrack.Table, snap *Snapshot, now conntrack.Time, budget int) {
	if s.endPending {
		if !s.out.Push(&Sighting{End: true, Pass: s.pass}) {
			return
		}
		s.endPending = false
	}
	if !s.running {
		switch {
		case !s.judged || snap.placement != s.placed:
			s.all = true
		case !now.Before(s.nextRefresh):
			s.all = false
		default:
			return
		}
		s.running, s.cursor = true, 0
		s.pass++
		s.passPlaced = snap.placement
		s.nextRefresh = now.Add(s.refresh)
	}
	s.snap, s.now = snap, now
	next, wrapped := ct.Scan(s.cursor, budget, now, s.all, s.visit)
	s.snap = nil
	s.cursor = next
	if !wrapped {
		return
	}
	s.running = false
	if s.all {
		// Entries judged before a placement change met during the pass
		// were judged against the old tables: the next step sees the
		// difference and starts another pass over every entry.
		s.placed, s.judged = s.passPlaced, true
	}
	s.endPending = !s.out.Push(&Sighting{End: true, Pass: s.pass})
}

// judge is the scan's visitor: an entry that still decides and whose
// backend is not its rule's pick is an exception, handed over.
func (s *exceptionScan) judge(e *conntrack.Entry, left conntrack.Ticks, _ bool) conntrack.ScanVerdict {
	k, rule, v := e.Key(), e.Rule(), e.Value()
	if !s.snap.EntryValid(rule, v, k.Proto, s.now) {
		return conntrack.ScanPlain // decides nothing; its peers' copies went stale by the same event
	}
	if pick, ok := s.snap.Pick(rule, &k); ok && pick == v.Backend {
		return conntrack.ScanPlain
	}
	if !s.out.Push(&Sighting{Key: k, Rule: rule, Value: v, ExpiresIn: left, Pass: s.pass}) {
		return conntrack.ScanStop
	}
	return conntrack.ScanException
}

// Pick returns the backend slot that rule's Maglev table picks today for
// the flow whose tracking key is k (the client's zone view under zonal
// affinity), and false when the rule is absent or its eligible set empty.
// It is what Decide would choose for a new flow of that key: the
// selection key is the part of the tracking key the rule's affinity
// hashes. It allocates nothing (the workers' scan and the fleet sender
// call it).
func (s *Snapshot) Pick(rule uint16, k *hash.Key) (uint32, bool) {
	if int(rule) >= len(s.Rules) || !s.Rules[rule].Present {
		return 0, false
	}
	r := s.Rules[rule]
	sel := hash.Key{Src: k.Src, Dst: k.Dst}
	switch {
	case r.Affinity == hash.AffinityClientIP:
		sel.Kind = hash.Tuple2
	case r.Affinity == hash.AffinityClientIPProto || k.Kind != hash.Tuple5:
		sel.Kind, sel.Proto = hash.Tuple3, k.Proto
	default:
		sel.Kind, sel.Proto, sel.SrcPort, sel.DstPort = hash.Tuple5, k.Proto, k.SrcPort, k.DstPort
	}
	return r.zoneTable(&k.Src).Lookup(hash.Sum64(&sel, s.Seed))
}

// Placement returns a digest of everything that decides where a new flow
// goes: the seed and, per rule slot, its Maglev table and zone tables.
// Two snapshots with equal Placement pick alike for every flow; the
// exception scan starts a pass over every entry when it changes.
func (s *Snapshot) Placement() uint64 { return s.placement }

// placementOf is rule slot's part of the snapshot's placement: the snapshot
// adds its rules' parts (a sum, so one rule's change does not need the
// others).
func (r *Rule) placementOf(slot uint16) uint64 {
	h := mix(mix(mix(0, uint64(slot)), uint64(r.Affinity)), r.Table.Placement())
	if r.zones != nil {
		for _, z := range *r.zones {
			h = mix(mix(mix(mix(h, z.hi), z.lo), uint64(z.bits)), z.table.Placement())
		}
	}
	return h
}

// mix folds v into h (a multiply-xorshift step; Placement needs no more
// than to differ when an input differs).
func mix(h, v uint64) uint64 {
	h = (h ^ v) * 0x9e3779b97f4a7c15
	return h ^ h>>29
}
