package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/xlbnet/xlb/pkg/dataplane"
)

// Rates: a fixed-window estimator, as ipvsadm's (the kernel's IPVS
// estimator samples its counters every 2 s). A goroutine of its own samples
// the workers' counters every estimatorWindow; every rate the daemon shows is
// the difference of the two latest samples divided by their distance, so a
// rate is at most one window old, says over which window it was measured,
// and is 0 one window after traffic stopped — whatever the time between
// two CLI calls. Requests read the two samples and never wait.

// estimatorWindow is the window of every rate the daemon shows.
const estimatorWindow = 2 * time.Second

// sample is one reading of the packet counters. New counters that need a
// rate go here (and in takeSample); rateWindow.of differences them.
type sample struct {
	at      time.Time
	rx      uint64
	queueRX map[int]uint64 // by queue id
	queueTX map[int]uint64
	// queueDrops are drops (not passes) by queue id.
	queueDrops map[int]uint64
	// backend: packets, bytes, new connections by (rule slot, backend
	// slot), only those with a count (at 1000 rules × 100 backends
	// without traffic, 14 MB less every 2 s); nil: not counted per
	// backend.
	backend map[[2]uint32]dataplane.Totals
}

// takeSample reads the workers' counters; safe from any goroutine.
func (d *daemon) takeSample() *sample {
	s := &sample{at: time.Now(), queueRX: map[int]uint64{}, queueTX: map[int]uint64{}, queueDrops: map[int]uint64{}}
	e := d.engine
	if e == nil {
		return s
	}
	for _, q := range e.Stats() {
		n := q.Counters.RXPackets.Load()
		s.rx += n
		s.queueRX[q.Queue] = n
		s.queueTX[q.Queue] = q.Counters.TXPackets.Load()
		s.queueDrops[q.Queue], _ = dropsOf(q.Counters)
	}
	bstats := e.BackendStats()
	snap := e.Snapshot()
	if bstats == nil || snap == nil {
		return s
	}
	s.backend = map[[2]uint32]dataplane.Totals{}
	for ri := range snap.Rules {
		r := snap.Rules[ri]
		for bi := range r.Backends {
			if !r.Backends[bi].Present {
				continue
			}
			var n dataplane.Totals
			for _, bs := range bstats {
				t := bs.Totals(uint16(ri), uint32(bi))
				n.Packets += t.Packets
				n.Bytes += t.Bytes
				n.Conns += t.Conns
			}
			if n != (dataplane.Totals{}) { // readers take a missing backend as zeros
				s.backend[[2]uint32{uint32(ri), uint32(bi)}] = n
			}
		}
	}
	return s
}

// dropsOf sums a queue's drop and pass counters (every reason).
func dropsOf(c *dataplane.Counters) (drops, passes uint64) {
	for r := range c.Reasons {
		switch reason := dataplane.Reason(r); {
		case reason == dataplane.ReasonNone:
		case reason.Pass():
			passes += c.Reasons[r].Load()
		default:
			drops += c.Reasons[r].Load()
		}
	}
	return drops, passes
}

// estimator keeps the two latest samples. tick takes the next one; run
// ticks every window until its context ends.
type estimator struct {
	window time.Duration
	source func() *sample

	mu        sync.Mutex // guards prev, cur
	prev, cur *sample
}

func newEstimator(window time.Duration, source func() *sample) *estimator {
	return &estimator{window: window, source: source}
}

func (e *estimator) tick() {
	s := e.source()
	e.mu.Lock()
	e.prev, e.cur = e.cur, s
	e.mu.Unlock()
}

func (e *estimator) run(ctx context.Context) {
	e.tick()
	t := time.NewTicker(e.window)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.tick()
		}
	}
}

// latest returns the last completed window. A nil estimator, or one that
// has not completed a window yet, returns a window with no rates.
func (e *estimator) latest() rateWindow {
	if e == nil {
		return rateWindow{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return rateWindow{nominal: e.window, cur: e.cur, prev: e.prev}
}

// startRates runs the daemon's estimator until the returned stop is
// called.
func (d *daemon) startRates() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.rates.run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// rateWindow is two consecutive samples. cur is the latest sample (nil
// before the first), prev the one before it (nil until a window ended).
type rateWindow struct {
	nominal   time.Duration
	cur, prev *sample
}

// ok reports whether the window has ended, so rates are known.
func (w rateWindow) ok() bool { return w.cur != nil && w.prev != nil }

// seconds is the window's measured length (0 when not ok).
func (w rateWindow) seconds() float64 {
	if !w.ok() {
		return 0
	}
	return w.cur.at.Sub(w.prev.at).Seconds()
}

// of returns the rate per second of the counter that counter reads from a
// sample (0 when the window has not ended or the counter went backwards).
func (w rateWindow) of(counter func(s *sample) uint64) float64 {
	if !w.ok() {
		return 0
	}
	return perSecond(counter(w.cur), counter(w.prev), w.seconds())
}

func perSecond(now, prev uint64, secs float64) float64 {
	if secs <= 0 || now < prev {
		return 0
	}
	return float64(now-prev) / secs
}
