package capture

import (
	"fmt"
	"math/bits"
)

// Limits of a capture.
const (
	DefaultSnaplen = 2048 // an AF_XDP frame: whole packets
	MaxSnaplen     = 65535
	DefaultRate    = 10000  // records per second per queue
	MaxRate        = 100000 // records per second per queue
	DefaultSlots   = 1024   // ring slots per queue
)

// Options size a Session.
type Options struct {
	Snaplen int // bytes kept per frame; 0 = DefaultSnaplen
	Rate    int // records per second per queue; 0 = DefaultRate
	Slots   int // ring slots per queue, rounded up to a power of two; 0 = DefaultSlots
}

func (o *Options) check() error {
	if o.Snaplen == 0 {
		o.Snaplen = DefaultSnaplen
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Slots == 0 {
		o.Slots = DefaultSlots
	}
	if o.Snaplen < 64 || o.Snaplen > MaxSnaplen {
		return fmt.Errorf("capture: snap length %d is outside [64, %d]", o.Snaplen, MaxSnaplen)
	}
	if o.Rate < 1 || o.Rate > MaxRate {
		return fmt.Errorf("capture: rate %d is outside [1, %d] packets per second per queue", o.Rate, MaxRate)
	}
	if o.Slots < 2 || o.Slots > 1<<16 {
		return fmt.Errorf("capture: %d ring slots is outside [2, 65536]", o.Slots)
	}
	o.Slots = 1 << bits.Len(uint(o.Slots-1))
	return nil
}

// Session is one capture over every queue: a Tap per queue, all with the
// same filter and limits. The daemon hands Tap(i) to worker i, drains
// them with Drain, and takes them back before it drops the session.
type Session struct {
	taps []*Tap
	opts Options
}

// NewSession returns a session of queues taps. Its memory (Slots ×
// Snaplen bytes per queue) is allocated here, never on the packet path.
func NewSession(f Filter, queues int, o Options) (*Session, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	f.compile()
	s := &Session{opts: o}
	// A burst of a twentieth of a second, and never less than a batch of
	// 64: a capture admits whole batches of a slow flow.
	burst := max(o.Rate/20, 64)
	for range queues {
		s.taps = append(s.taps, newTap(f, o.Slots, uint32(o.Snaplen), o.Rate, burst))
	}
	return s, nil
}

// Tap returns queue index i's tap (an index into the daemon's queues, not
// the queue id).
func (s *Session) Tap(i int) *Tap { return s.taps[i] }

// Snaplen returns the session's snap length.
func (s *Session) Snaplen() int { return s.opts.Snaplen }

// Drain calls fn with every record published since the last Drain, tap by
// tap (i is the tap's index); data is valid only during the call. It
// returns how many records it read. Drain must not run concurrently with
// itself.
func (s *Session) Drain(fn func(i int, r *Record, data []byte)) int {
	n := 0
	for i, t := range s.taps {
		n += t.read(func(r *Record, data []byte) { fn(i, r, data) })
	}
	return n
}

// Stats sums the taps' counts.
func (s *Session) Stats() TapStats {
	var sum TapStats
	for _, t := range s.taps {
		st := t.Stats()
		sum.Captured += st.Captured
		sum.Limited += st.Limited
		sum.Lost += st.Lost
	}
	return sum
}
