package conntrack

import "github.com/xlbnet/xlb/hash"

// Marks and scans for fleet flow-state sharing (pkg/fleet): the worker
// marks the entries whose backend is not what their rule's Maglev table
// picks now ("exceptions": the only flows a peer appliance could not put
// back where they are), and scans its own table, a bounded number of
// buckets per batch, for the entries that are or became exceptions. The
// marks are bits of the header's flags, like the closed mark: the arena's
// layout does not change, and a scan of the marked entries reads only
// header lines except where a mark is set.

// Mark is a bit a worker sets on a live entry with MarkAt.
type Mark uint8

const (
	// MarkException says the entry's backend is not what its rule's table
	// picks for it now. Scan sets and clears it; an Insert by a SYN over
	// the entry clears it, as it clears the closed mark.
	MarkException = Mark(flagException)
	// MarkFromPeer says the entry was made from a fleet peer's entry (the
	// flow moved here from another appliance): `xlb lookup` says so. An
	// Insert by a SYN clears it.
	MarkFromPeer = Mark(flagFromPeer)
)

// MarkAt sets m on the live entry of (k, rule) at the Probe Locate
// returned and reports whether it found the entry. Like CloseAt it reads
// the lines the packet's insert has just read.
func (t *Table) MarkAt(p Probe, k *hash.Key, rule uint16, m Mark) bool {
	b, i := t.search(p, k, rule)
	if i < 0 {
		return false
	}
	b.flags[i] |= uint8(m)
	return true
}

// ScanVerdict is a Scan visitor's answer for one entry.
type ScanVerdict uint8

const (
	// ScanPlain clears the entry's MarkException.
	ScanPlain ScanVerdict = iota
	// ScanException sets it.
	ScanException
	// ScanStop ends this call before the entry (the visitor could not
	// take it, e.g. its hand-off ring is full): the next call starts
	// again at this entry.
	ScanStop
)

// ScanVisitor judges one live entry during Scan: e is valid for the call
// only, left is its time to live, marked whether it carries
// MarkException. It runs on the worker: it must not block or allocate.
type ScanVisitor func(e *Entry, left Ticks, marked bool) ScanVerdict

// Scan visits the live entries from slot cursor on (slots are numbered
// in arena order, Ways per bucket) to the end of budget buckets, and sets
// or clears each one's MarkException as the visitor says. With all false
// only the marked entries are visited (and only their slot lines read).
// It returns the slot to continue from and whether the scan reached the
// end of the arena (next is then 0: a pass is complete). Worker goroutine
// only, between batches.
func (t *Table) Scan(cursor, budget int, now Time, all bool, visit ScanVisitor) (next int, wrapped bool) {
	nb := len(t.buckets)
	if cursor < 0 || cursor >= nb*Ways {
		cursor = 0
	}
	first := cursor / Ways
	end := min(first+max(budget, 1), nb)
	for c := first; c < end; c++ {
		b := &t.buckets[c]
		i0 := 0
		if c == first {
			i0 = cursor % Ways
		}
		for i := i0; i < Ways; i++ {
			f := b.flags[i]
			if b.tags[i] == 0 || (!all && f&flagException == 0) || !now.Before(b.expires[i]) {
				continue
			}
			switch visit(&b.slots[i], Ticks(b.expires[i].Sub(now)), f&flagException != 0) {
			case ScanException:
				b.flags[i] = f | flagException
			case ScanPlain:
				b.flags[i] = f &^ flagException
			default:
				return c*Ways + i, false
			}
		}
	}
	if end == nb {
		return 0, true
	}
	return end * Ways, false
}

// Buckets returns the number of buckets (the unit of Scan's budget).
func (t *Table) Buckets() int { return len(t.buckets) }
