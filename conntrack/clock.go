package conntrack

import (
	"sync/atomic"
	"time"
)

// TicksPerSecond is the resolution of Time: 1/16 s. Entries store times in
// 32 bits, so a Time wraps after 2^32/16 s (about 8.5 years); comparisons
// are wrap-safe for differences below 2^31 ticks (about 4.2 years).
const TicksPerSecond = 16

const tickNanos = int64(time.Second) / TicksPerSecond

// maxTicks bounds a Ticks duration so that now+idle never wraps past the
// half-range that wrap-safe comparisons need.
const maxTicks = 1 << 30

// Time is an instant in ticks of 1/16 s since the clock's zero. The worker
// reads its Clock once per batch and passes the result to every call.
type Time uint32

// Ticks is a duration in ticks of 1/16 s.
type Ticks uint32

// TicksOf converts d to ticks, rounding up so that an entry never lives
// shorter than d; d ≤ 0 gives 0 and very long durations are capped at
// 2^30 ticks (about 2.1 years).
func TicksOf(d time.Duration) Ticks {
	if d <= 0 {
		return 0
	}
	n := (int64(d) + tickNanos - 1) / tickNanos
	if n > maxTicks {
		n = maxTicks
	}
	return Ticks(n)
}

// Duration converts t back to a time.Duration.
func (t Ticks) Duration() time.Duration { return time.Duration(int64(t) * tickNanos) }

// Add returns t+d.
func (t Time) Add(d Ticks) Time { return t + Time(d) }

// Before reports whether t is before u, correctly across a wrap of the
// 32-bit counter as long as the two are less than 2^31 ticks apart.
func (t Time) Before(u Time) bool { return int32(t-u) < 0 }

// Sub returns t-u in ticks as a signed number (negative when t is before u).
func (t Time) Sub(u Time) int32 { return int32(t - u) }

// Clock is the injected source of monotonic time, in nanoseconds from an
// arbitrary zero. Implementations must be safe for concurrent use.
type Clock interface {
	Nanotime() int64
}

// Now reads c and converts it to a Time.
func Now(c Clock) Time { return TimeOf(c.Nanotime()) }

// TimeOf converts monotonic nanoseconds to a Time.
func TimeOf(nanos int64) Time { return Time(uint64(nanos / tickNanos)) }

// SystemClock is the monotonic system clock, counted from its creation.
type SystemClock struct{ start time.Time }

// NewSystemClock returns a SystemClock whose zero is now.
func NewSystemClock() *SystemClock { return &SystemClock{start: time.Now()} }

// Nanotime returns the monotonic nanoseconds since c was created.
func (c *SystemClock) Nanotime() int64 { return int64(time.Since(c.start)) }

// FakeClock is a Clock that moves only when told to, for tests. Its zero
// value reads 0 and is ready to use; it is safe for concurrent use.
type FakeClock struct{ nanos atomic.Int64 }

// Nanotime returns the fake time.
func (c *FakeClock) Nanotime() int64 { return c.nanos.Load() }

// Set moves the fake clock to d after its zero.
func (c *FakeClock) Set(d time.Duration) { c.nanos.Store(int64(d)) }

// Advance moves the fake clock forward by d.
func (c *FakeClock) Advance(d time.Duration) { c.nanos.Add(int64(d)) }

var (
	_ Clock = (*SystemClock)(nil)
	_ Clock = (*FakeClock)(nil)
)
