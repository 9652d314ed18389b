package conntrack

import (
	"time"

	"golang.org/x/sys/unix"
)

// MonotonicClock counts CLOCK_MONOTONIC nanoseconds from a base: a zero
// that another process can share. SystemClock's zero is private to its
// process (Go's monotonic readings are), so entries a process wrote into
// an arena it hands over would mean nothing to the next; with the base
// carried along (the arena header, the hand-over's state document), a
// successor reads the same clock and every stored deadline keeps its
// meaning. CLOCK_MONOTONIC is system-wide and never jumps; it stops
// during suspend, as Go's monotonic clock does.
type MonotonicClock struct {
	offset int64     // CLOCK_MONOTONIC at start, minus the base
	start  time.Time // Go's monotonic reading taken with it
}

// NewMonotonicClock returns a clock whose zero is now.
func NewMonotonicClock() *MonotonicClock { return MonotonicClockAt(MonotonicNow()) }

// MonotonicClockAt returns a clock whose zero is base, a CLOCK_MONOTONIC
// value in nanoseconds (Base of another MonotonicClock).
func MonotonicClockAt(base int64) *MonotonicClock {
	// Go's monotonic clock is CLOCK_MONOTONIC on Linux, so one reading of
	// each, taken together, ties them; Nanotime then needs no syscall.
	mono, at := monotonicWithGo()
	return &MonotonicClock{offset: mono - base, start: at}
}

// tieTries and tieGap bound monotonicWithGo's attempts.
const (
	tieTries = 10
	tieGap   = 20 * time.Microsecond
)

// monotonicWithGo reads CLOCK_MONOTONIC and Go's clock at one moment: the
// syscall between two Go readings, their midpoint as its moment. A
// process preempted between two readings (a busy machine does it for
// milliseconds) would tie the clocks that far apart, so it reads again,
// up to tieTries times, until the two Go readings are at most tieGap
// apart, and keeps the closest pair.
func monotonicWithGo() (mono int64, at time.Time) {
	best := time.Duration(-1)
	for range tieTries {
		before := time.Now()
		m := MonotonicNow()
		gap := time.Since(before)
		if best < 0 || gap < best {
			best, mono, at = gap, m, before.Add(gap/2)
		}
		if gap <= tieGap {
			break
		}
	}
	return mono, at
}

// MonotonicNow reads CLOCK_MONOTONIC in nanoseconds.
func MonotonicNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("conntrack: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}

// Nanotime returns the nanoseconds since the base.
func (c *MonotonicClock) Nanotime() int64 { return c.offset + int64(time.Since(c.start)) }

// Base returns the CLOCK_MONOTONIC value of the clock's zero.
func (c *MonotonicClock) Base() int64 {
	mono, at := monotonicWithGo()
	return mono - (c.offset + int64(at.Sub(c.start)))
}

var _ Clock = (*MonotonicClock)(nil)
