package dataplane

import "sync/atomic"

// BackendStats counts the packets and bytes one worker sent to each
// backend of each rule, and the new connections among them, for `xlb
// status`, `xlb backend list`, `xlb top` and the metrics.
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
	Totals
	batch uint32 // the batch that last touched it
	pub   *pubCount
}

// Totals are what was sent to one backend.
type Totals struct {
	Packets uint64 // packets sent on (fragments of one packet count once)
	Bytes   uint64 // their IP bytes as received (before encapsulation)
	Conns   uint64 // new connections: tracked flows placed by the Maglev table
}

// pubCount is one backend's published Totals.
type pubCount struct {
	packets, bytes, conns atomic.Uint64
}

func (p *pubCount) store(t *Totals) {
	p.packets.Store(t.Packets)
	p.bytes.Store(t.Bytes)
	p.conns.Store(t.Conns)
}

// backendCounts is counts[rule slot][backend slot].
type backendCounts struct {
	rules [][]pubCount
}

// Count records one packet of bytes IP bytes sent to backend slot backend
// of rule slot rule; newConn says it opened a connection. Worker only;
// allocates nothing once the slot is known.
func (s *BackendStats) Count(rule uint16, backend uint32, bytes uint32, newConn bool) {
	if int(rule) >= len(s.own) || int(backend) >= len(s.own[rule]) {
		s.grow(rule, backend)
	}
	c := &s.own[rule][backend]
	c.Packets++
	c.Bytes += uint64(bytes)
	if newConn {
		c.Conns++
	}
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
		c.pub.store(&c.Totals)
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
	pub := &backendCounts{rules: make([][]pubCount, n)}
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
		pub.rules[r] = make([]pubCount, size)
		own[r] = make([]ownCount, size)
		for b := range own[r] {
			if r < len(s.own) && b < len(s.own[r]) {
				own[r][b].Totals = s.own[r][b].Totals
			}
			own[r][b].pub = &pub.rules[r][b]
			own[r][b].pub.store(&own[r][b].Totals)
		}
	}
	s.own, s.pub = own, pub
	s.table.Store(pub)
}

// Packets returns the packets counted for (rule, backend) as of the
// worker's last Flush. Safe from any goroutine.
func (s *BackendStats) Packets(rule uint16, backend uint32) uint64 {
	return s.Totals(rule, backend).Packets
}

// Totals returns what was counted for (rule, backend) as of the worker's
// last Flush. Safe from any goroutine; the three are read one after the
// other, so a batch may show in one and not yet in the next.
func (s *BackendStats) Totals(rule uint16, backend uint32) Totals {
	t := s.table.Load()
	if t == nil || int(rule) >= len(t.rules) || int(backend) >= len(t.rules[rule]) {
		return Totals{}
	}
	p := &t.rules[rule][backend]
	return Totals{Packets: p.packets.Load(), Bytes: p.bytes.Load(), Conns: p.conns.Load()}
}
