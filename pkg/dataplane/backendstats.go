package dataplane

import "sync/atomic"

// BackendStats counts the packets one worker sent to each backend of each
// rule, for `xlb status` and `xlb backend list` (packets/s per backend).
//
// The worker owns it: it calls Count once per forwarded packet and Flush
// once per batch; any goroutine may call Packets. Count touches only the
// worker's own fields: it runs consecutive packets of one (rule, backend)
// together (a batch of a bulk flow is one run) and Flush adds each run
// with one atomic add to the published table, so the packet path costs a
// compare and an increment, and no atomic per packet.
//
// The table is indexed by the stable rule and backend slots, so counts
// survive snapshot swaps. It grows when a slot beyond it shows up (a new
// rule or backend): the worker builds a larger table, copies the counts
// and publishes it with one atomic store. That allocation happens once
// per new slot, never per packet; readers of the old table see its counts
// as of the switch, which the new table carries on.
type BackendStats struct {
	table atomic.Pointer[backendCounts] // published to readers
	own   *backendCounts                // the worker's copy of the same pointer

	// The current run of packets to one backend, not yet in the table.
	rule    uint16
	backend uint32
	run     uint64
}

// backendCounts is counts[rule slot][backend slot].
type backendCounts struct {
	rules [][]atomic.Uint64
}

// Count records one packet sent to backend slot backend of rule slot
// rule. Worker only; allocates nothing.
func (s *BackendStats) Count(rule uint16, backend uint32) {
	if s.run != 0 && rule == s.rule && backend == s.backend {
		s.run++
		return
	}
	s.Flush()
	s.rule, s.backend, s.run = rule, backend, 1
}

// Flush adds the pending run to the published counts. The worker calls it
// at the end of every batch, so readers are at most one batch behind.
func (s *BackendStats) Flush() {
	if s.run == 0 {
		return
	}
	t := s.own
	if t == nil || int(s.rule) >= len(t.rules) || int(s.backend) >= len(t.rules[s.rule]) {
		t = s.grow(s.rule, s.backend)
	}
	t.rules[s.rule][s.backend].Add(s.run)
	s.run = 0
}

// grow publishes a table with room for (rule, backend), carrying the
// counts over. Backend rows double so a rule that keeps gaining backends
// regrows only logarithmically often.
func (s *BackendStats) grow(rule uint16, backend uint32) *backendCounts {
	old := s.own
	n := int(rule) + 1
	if old != nil {
		n = max(n, len(old.rules))
	}
	t := &backendCounts{rules: make([][]atomic.Uint64, n)}
	for r := range t.rules {
		size := 0
		if old != nil && r < len(old.rules) {
			size = len(old.rules[r])
		}
		if r == int(rule) && int(backend) >= size {
			size = max(int(backend)+1, 2*size, 8)
		}
		if size == 0 {
			continue
		}
		t.rules[r] = make([]atomic.Uint64, size)
		if old != nil && r < len(old.rules) {
			for b := range old.rules[r] {
				t.rules[r][b].Store(old.rules[r][b].Load())
			}
		}
	}
	s.own = t
	s.table.Store(t)
	return t
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
