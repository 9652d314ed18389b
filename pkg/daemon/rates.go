package daemon

import (
	"context"
	"time"
)

// sample is one reading of the packet counters.
type sample struct {
	at      time.Time
	rx      uint64
	backend map[[2]uint32]uint64 // nil: the workers do not count per backend
}

func (o *ops) takeSample() *sample {
	s := &sample{at: time.Now()}
	e := o.d.engine
	if e == nil {
		return s
	}
	for _, q := range e.Stats() {
		s.rx += q.Counters.RXPackets.Load()
	}
	bstats := e.backendStats()
	if bstats == nil {
		return s
	}
	s.backend = map[[2]uint32]uint64{}
	snap := e.Snapshot()
	if snap == nil {
		return s
	}
	for ri := range snap.Rules {
		r := &snap.Rules[ri]
		for bi := range r.Backends {
			if !r.Backends[bi].Present {
				continue
			}
			var n uint64
			for _, bs := range bstats {
				n += bs.Packets(uint16(ri), uint32(bi))
			}
			s.backend[[2]uint32{uint32(ri), uint32(bi)}] = n
		}
	}
	return s
}

// rates returns the current sample and the one to difference it with.
func (o *ops) rates(ctx context.Context) (now, prev *sample) {
	o.mu.Lock()
	prev = o.last
	o.mu.Unlock()
	if prev == nil || time.Since(prev.at) < 500*time.Millisecond || time.Since(prev.at) > time.Minute {
		prev = o.takeSample()
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return prev, nil
		}
	}
	now = o.takeSample()
	o.mu.Lock()
	if o.last == nil || now.at.After(o.last.at) {
		o.last = now
	}
	o.mu.Unlock()
	return now, prev
}

func perSecond(now, prev uint64, secs float64) float64 {
	if secs <= 0 || now < prev {
		return 0
	}
	return float64(now-prev) / secs
}
