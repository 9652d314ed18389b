package dataplane

import "sync/atomic"

// BackendStats counts the packets one worker sent to each backend of each
// rule, for `xlb status` and `xlb backend list` (packets/s per backend).
//
// The worker owns it: it calls Count once per forwarded packet and Flush
// once per batch; any goroutine may call Packets. Count touches only the
// worker's own plain counters (an increment, and on the first packet of
// a batch to that backend, one entry in the batch's list of touched
// counters); Flush publishes each touched counter with one atomic store
// of its total. So the packet path makes no atomic operation, and a batch
// makes one per backend it sent to, however its packets interleave.
//
// The tables are indexed by the stable rule and backend slots, so counts
// survive snapshot swaps. They grow when a slot beyond them shows up (a
// new rule or backend): the worker builds larger ones, copies the counts
// and publishes the new one with one atomic store. That allocation
// happens once per new slot, never per packet; readers of the old table
// see its counts as of the switch, which the new table carries on.
type BackendStats struct {
	table atomic.Pointer[backendCounts] // published to readers
	pub   *backendCounts                // the worker's copy of the same pointer
	own   [][]ownCount                  // the worker's totals, same shape

	batch   uint32 // the current batch, stamped on the counters it touched
	touched [Batch]*ownCount
	ntouch  int
}

// ownCount is one worker-owned total and where it is published.
type ownCount struct {
	n     uint64
	batch uint32 // the batch that last touched it
	pub   *atomic.Uint64
}

// backendCounts is counts[rule slot][backend slot].
type backendCounts struct {
	rules [][]atomic.Uint64
}

// Count records one packet sent to backend slot backend of rule slot
// rule. Worker only; allocates nothing once the slot is known.
func (s *BackendStats) Count(rule uint16, backend uint32) {
	if int(rule) >= len(s.own) || int(backend) >= len(s.own[rule]) {
		s.grow(rule, backend)
	}
	c := &s.own[rule][backend]
	c.n++
	if c.batch != s.batch {
		if s.ntouch == len(s.touched) {
			s.Flush()
		}
		c.batch = s.batch
		s.touched[s.ntouch] = c
		s.ntouch++
	}
}

// Flush publishes the counters touched since the last Flush. The worker
// calls it at the end of every batch, so readers are at most one batch
// behind.
func (s *BackendStats) Flush() {
	for _, c := range s.touched[:s.ntouch] {
		c.pub.Store(c.n)
	}
	s.ntouch = 0
	s.batch++
	if s.batch == 0 {
		s.batch = 1 // 0 is the stamp of a counter never touched
	}
}

// grow publishes tables with room for (rule, backend), carrying the
// counts over. Backend rows double so a rule that keeps gaining backends
// regrows only logarithmically often.
func (s *BackendStats) grow(rule uint16, backend uint32) {
	s.Flush() // the touched list points into the old rows
	n := max(int(rule)+1, len(s.own))
	pub := &backendCounts{rules: make([][]atomic.Uint64, n)}
	own := make([][]ownCount, n)
	for r := range n {
		size := 0
		if r < len(s.own) {
			size = len(s.own[r])
		}
		if r == int(rule) && int(backend) >= size {
			size = max(int(backend)+1, 2*size, 8)
		}
		if size == 0 {
			continue
		}
		pub.rules[r] = make([]atomic.Uint64, size)
		own[r] = make([]ownCount, size)
		for b := range own[r] {
			if r < len(s.own) && b < len(s.own[r]) {
				own[r][b].n = s.own[r][b].n
			}
			own[r][b].pub = &pub.rules[r][b]
			own[r][b].pub.Store(own[r][b].n)
		}
	}
	s.own, s.pub = own, pub
	s.table.Store(pub)
}

// Packets returns the packets counted for (rule, backend) as of the
// worker's last Flush. Safe from any goroutine.
func (s *BackendStats) Packets(rule uint16, backend uint32) uint64 {
	t := s.table.Load()
	if t == nil || int(rule) >= len(t.rules) || int(backend) >= len(t.rules[rule]) {
		return 0
	}
	return t.rules[rule][backend].Load()
}
