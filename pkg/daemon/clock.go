package daemon

import (
	"time"

	"github.com/xlbnet/xlb/conntrack"
)

// clock is the one clock of a daemon: monotonic nanoseconds since start
// for the workers (conntrack.Clock), and the conversion of the control
// plane's wall-clock deadlines into the workers' ticks (dataplane.Clock).
type clock struct{ start time.Time }

func newClock() *clock { return &clock{start: time.Now()} }

func (c *clock) Nanotime() int64 { return int64(time.Since(c.start)) }

func (c *clock) Ticks(t time.Time) conntrack.Time {
	d := t.Sub(c.start)
	if d < 0 {
		d = 0
	}
	return conntrack.TimeOf(int64(d))
}
