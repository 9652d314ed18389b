package capture

import (
	"sync/atomic"

	"github.com/xlbnet/xlb/pkg/packet"
)

// Point is where a worker saw a packet; a Filter takes a set of them.
type Point uint8

const (
	// RX is the frame as received, before anything rewrote it.
	RX Point = 1 << iota
	// TX is the frame as sent: encapsulated towards a backend, an echo
	// reply, or the ICMP error sent back in place of an oversize packet.
	TX
	// Both is RX and TX.
	Both = RX | TX
)

// String returns "rx", "tx" or "both".
func (p Point) String() string {
	switch p {
	case RX:
		return "rx"
	case TX:
		return "tx"
	case Both:
		return "both"
	}
	return "point-unknown"
}

// ParsePoint parses rx, tx or both.
func ParsePoint(s string) (Point, bool) {
	for _, p := range []Point{RX, TX, Both} {
		if s == p.String() {
			return p, true
		}
	}
	return 0, false
}

// Outcome is what the worker did with a packet, in the numbers of
// package dataplane (capture does not import it: dataplane imports
// capture).
type Outcome struct {
	BackendAddr [16]byte // the backend's address (IPv4 mapped), when HasBackend
	Rule        uint16   // rule slot, when HasRule
	Verdict     uint8    // dataplane.Verdict
	Reason      uint8    // dataplane.Reason (0 unless dropped or passed)
	HasRule     bool
	HasBackend  bool
}

// Record is one captured frame's metadata; its bytes are kept beside it
// in the tap's ring.
type Record struct {
	Time   int64  // unix nanoseconds, read once per worker batch
	Len    uint32 // the frame's length
	CapLen uint32 // bytes kept (at most the snap length)
	Point  Point  // RX or TX
	Outcome
}

// Tap is one queue's end of a capture: its filter, its rate limit and a
// ring of preallocated slots the worker copies matching frames into and
// the session drains. One worker produces and one goroutine consumes; the
// producer side allocates nothing, takes no lock and makes no syscall.
type Tap struct {
	filter Filter

	// The ring: slot i holds recs[i] and data[i*snap:(i+1)*snap].
	recs []Record
	data []byte
	snap uint32
	mask uint64
	head atomic.Uint64 // next slot the worker fills; published per record
	tail atomic.Uint64 // next slot the consumer reads

	// Producer-only state.
	cachedTail uint64
	staged     bool  // slot head holds a copied frame, not yet committed
	now        int64 // the batch's time (Begin)
	last       int64 // previous Begin
	credit     int64 // nanoseconds of rate credit; a record costs cost
	cost       int64 // nanoseconds per record at the configured rate
	maxCredit  int64

	captured, limited, lost atomic.Uint64
}

// newTap returns a tap with slots slots (a power of two) of snap bytes
// each, admitting at most rate records per second in bursts of burst.
func newTap(f Filter, slots int, snap uint32, rate, burst int) *Tap {
	t := &Tap{
		filter: f,
		recs:   make([]Record, slots),
		data:   make([]byte, slots*int(snap)),
		snap:   snap,
		mask:   uint64(slots - 1),
		cost:   int64(1e9) / int64(rate),
	}
	t.maxCredit = int64(burst) * t.cost
	t.credit = t.maxCredit
	return t
}

// Begin starts a worker batch at now (unix nanoseconds): the records of
// the batch carry that time, and the rate credit grows by the time since
// the previous batch, up to one burst.
func (t *Tap) Begin(now int64) {
	if t.last != 0 && now > t.last {
		t.credit = min(t.credit+(now-t.last), t.maxCredit)
	}
	t.last, t.now = now, now
	t.staged = false
}

// MatchFlow reports whether the packet's headers, rule and backend pass
// the filter; the worker asks before copying a frame that its outcome may
// still change.
func (t *Tap) MatchFlow(m *packet.Meta, o *Outcome) bool {
	return t.filter.matchFlow(m) && t.filter.matchSlots(o)
}

// Match reports whether the filter takes packet m with its final outcome
// o at point p.
func (t *Tap) Match(p Point, m *packet.Meta, o *Outcome) bool {
	return t.filter.points&p != 0 && t.filter.matchFlow(m) && t.filter.matchSlots(o) && t.filter.matchOutcome(o)
}

// Wants reports whether the filter takes anything at point p.
func (t *Tap) Wants(p Point) bool { return t.filter.points&p != 0 }

// room reports whether a record may be added now: rate credit and a free
// slot; it counts what it refuses.
func (t *Tap) room() bool {
	if t.credit < t.cost {
		t.limited.Add(1)
		return false
	}
	head := t.head.Load() // the producer's own index: no contention
	if head-t.cachedTail > t.mask {
		t.cachedTail = t.tail.Load()
		if head-t.cachedTail > t.mask {
			t.lost.Add(1)
			return false
		}
	}
	return true
}

// Stage copies frame into the next slot without publishing it, so that an
// RX copy can be taken before the frame is rewritten and published once
// the outcome is final (Commit) or forgotten (the next Stage or Put
// overwrites it). It reports whether the frame was copied.
func (t *Tap) Stage(frame []byte) bool {
	t.staged = false
	if !t.room() {
		return false
	}
	t.fill(frame)
	t.staged = true
	return true
}

// Commit publishes the staged frame as an RX record with outcome o.
func (t *Tap) Commit(o *Outcome) {
	if !t.staged {
		return
	}
	t.staged = false
	t.publish(RX, o)
}

// Put copies frame and publishes it as a record of point p, if the rate
// and the ring allow; it reports whether it did.
func (t *Tap) Put(p Point, o *Outcome, frame []byte) bool {
	t.staged = false
	if !t.room() {
		return false
	}
	t.fill(frame)
	t.publish(p, o)
	return true
}

func (t *Tap) fill(frame []byte) {
	i := t.head.Load() & t.mask
	n := copy(t.data[uint64(t.snap)*i:uint64(t.snap)*(i+1)], frame)
	r := &t.recs[i]
	r.Len, r.CapLen = uint32(len(frame)), uint32(n)
}

func (t *Tap) publish(p Point, o *Outcome) {
	head := t.head.Load()
	r := &t.recs[head&t.mask]
	r.Time, r.Point, r.Outcome = t.now, p, *o
	t.credit -= t.cost
	t.captured.Add(1)
	t.head.Store(head + 1)
}

// read calls fn for every published record not read yet, in order; the
// data slice is valid only during the call. Consumer only.
func (t *Tap) read(fn func(r *Record, data []byte)) int {
	head, tail := t.head.Load(), t.tail.Load()
	for i := tail; i != head; i++ {
		s := i & t.mask
		r := &t.recs[s]
		off := uint64(t.snap) * s
		fn(r, t.data[off:off+uint64(r.CapLen)])
	}
	t.tail.Store(head)
	return int(head - tail)
}

// TapStats count a tap's records: published, refused by the rate limit,
// and refused because the ring was full (the reader fell behind).
type TapStats struct {
	Captured uint64 `json:"captured"`
	Limited  uint64 `json:"rate_limited"`
	Lost     uint64 `json:"ring_full"`
}

// Stats returns the tap's counts; safe from any goroutine.
func (t *Tap) Stats() TapStats {
	return TapStats{Captured: t.captured.Load(), Limited: t.limited.Load(), Lost: t.lost.Load()}
}
