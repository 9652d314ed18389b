package daemon

import (
	"time"

	"github.com/xlbnet/xlb/conntrack"
)

// clock is the one clock of a daemon: monotonic nanoseconds since its
// zero for the workers (conntrack.Clock), and the conversion of the
// control plane's wall-clock deadlines into the workers' ticks
// (dataplane.Clock). Its zero is a CLOCK_MONOTONIC value (Base) that a
// successor process takes over, so the deadlines stored in the conntrack
// arenas keep their meaning across a restart.
type clock struct {
	mono  *conntrack.MonotonicClock
	start time.Time // the zero, as a time.Time of this process
	// base is the zero as given: MonotonicClock.Base computes it again
	// from two readings, a few nanoseconds off each time, which would
	// change the state document's head at every store (statestore.go).
	base int64
}

func newClock() *clock { return newClockAt(conntrack.MonotonicNow()) }

// newClockAt returns the clock whose zero is base (CLOCK_MONOTONIC ns).
func newClockAt(base int64) *clock {
	m := conntrack.MonotonicClockAt(base)
	return &clock{mono: m, start: time.Now().Add(-time.Duration(m.Nanotime())), base: base}
}

func (c *clock) Nanotime() int64 { return c.mono.Nanotime() }

// Base is the CLOCK_MONOTONIC value of the clock's zero.
func (c *clock) Base() int64 { return c.base }

func (c *clock) Ticks(t time.Time) conntrack.Time {
	d := t.Sub(c.start)
	if d < 0 {
		d = 0
	}
	return conntrack.TimeOf(int64(d))
}
