package health

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Checker probes a set of targets, each on its own goroutine and schedule,
// and reports changes to Options.OnChange. Its methods are safe for
// concurrent use.
type Checker struct {
	opts Options // defaults filled in
	seed uint64

	root   context.Context // cancelled by Stop
	cancel context.CancelFunc

	reload  sync.Mutex // serialises Set, Add, Remove and Stop (held while probers stop)
	mu      sync.Mutex // guards targets and stopped; held only briefly
	targets map[Key]*target
	stopped bool

	emit sync.Mutex // one OnChange call at a time
	wg   sync.WaitGroup
}

// target is one prober: its configuration, its goroutine and its state.
type target struct {
	Target
	p      *prober
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has returned

	mu sync.Mutex // guards tr: written by the goroutine, read by Status
	tr tracker
}

// New returns a Checker with no targets.
func New(opts Options) *Checker {
	if opts.Dial == nil {
		opts.Dial = DirectDial
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	c := &Checker{opts: opts, seed: opts.Seed, targets: make(map[Key]*target)}
	if c.seed == 0 {
		c.seed = rand.Uint64()
	}
	c.root, c.cancel = context.WithCancel(context.Background())
	return c
}

// Set makes targets the whole set of probed targets (a reload): new ones
// start, missing ones stop, and those whose check changed restart on the
// new check while keeping their state (health, weight and streaks). The
// others go on untouched. Nothing changes if a target is invalid or
// listed twice.
func (c *Checker) Set(targets []Target) error {
	want := make(map[Key]Target, len(targets))
	for _, t := range targets {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("set health targets: %w", err)
		}
		if _, dup := want[t.Key]; dup {
			return fmt.Errorf("set health targets: %s listed twice", t.Key)
		}
		want[t.Key] = t
	}
	c.reload.Lock()
	defer c.reload.Unlock()
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return ErrStopped
	}
	var stop []*target
	for k, old := range c.targets {
		if t, ok := want[k]; !ok || t.Check != old.Check {
			stop = append(stop, old)
		}
	}
	c.mu.Unlock()
	stopAll(stop)

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, old := range stop {
		delete(c.targets, old.Key)
	}
	for k, t := range want {
		if _, running := c.targets[k]; running {
			continue
		}
		var prev *tracker
		for _, old := range stop {
			if old.Key == k {
				prev = &old.tr // its goroutine has returned: no lock needed
			}
		}
		c.start(t, prev)
	}
	return nil
}

// Add starts probing t; it fails if t's Key is already probed.
func (c *Checker) Add(t Target) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("add health target: %w", err)
	}
	c.reload.Lock()
	defer c.reload.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return ErrStopped
	}
	if _, ok := c.targets[t.Key]; ok {
		return fmt.Errorf("add health target: %s is already probed", t.Key)
	}
	c.start(t, nil)
	return nil
}

// Remove stops probing k and waits for its prober to end; it reports
// whether k was probed.
func (c *Checker) Remove(k Key) bool {
	c.reload.Lock()
	defer c.reload.Unlock()
	c.mu.Lock()
	t, ok := c.targets[k]
	c.mu.Unlock()
	if !ok {
		return false
	}
	stopAll([]*target{t})
	c.mu.Lock()
	delete(c.targets, k)
	c.mu.Unlock()
	return true
}

// Stop stops every prober and waits for them. Later calls to Set and Add
// return ErrStopped; Stop may be called again.
func (c *Checker) Stop() {
	c.reload.Lock()
	defer c.reload.Unlock()
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// Status returns the status of every target, sorted by rule then backend.
func (c *Checker) Status() []Status {
	c.mu.Lock()
	ts := make([]*target, 0, len(c.targets))
	for _, t := range c.targets {
		ts = append(ts, t)
	}
	c.mu.Unlock()
	out := make([]Status, len(ts))
	for i, t := range ts {
		t.mu.Lock()
		out[i] = t.tr.st
		t.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Status) int {
		return cmp.Or(cmp.Compare(a.Rule, b.Rule), a.Backend.Compare(b.Backend))
	})
	return out
}

// stopAll cancels every target first and then waits, so that in-flight
// probes end together rather than one timeout after another.
func stopAll(ts []*target) {
	for _, t := range ts {
		t.cancel()
	}
	for _, t := range ts {
		<-t.done
	}
}

// start launches t's goroutine; prev, if not nil, is the state to carry
// over from the prober it replaces. c.mu is held.
func (c *Checker) start(t Target, prev *tracker) {
	rise, fall := t.Check.HealthyThreshold, t.Check.UnhealthyThreshold
	if t.Check.Kind == NoProbe {
		rise, fall = 1, 1
	}
	tg := &target{
		Target: t,
		p:      newProber(t, c.opts.Dial, c.opts.TLS),
		done:   make(chan struct{}),
		tr:     newTracker(t.Key, rise, fall, c.opts.Clock.Now()),
	}
	if prev != nil {
		tg.tr.successes, tg.tr.failures, tg.tr.st = prev.successes, prev.failures, prev.st
	}
	var ctx context.Context
	ctx, tg.cancel = context.WithCancel(c.root)
	c.targets[t.Key] = tg
	c.wg.Add(1)
	go c.run(ctx, tg)
}

// run is the goroutine of one target: wait, probe, record, report.
func (c *Checker) run(ctx context.Context, t *target) {
	defer c.wg.Done()
	defer close(t.done)
	if t.Check.Kind == NoProbe {
		// No checks: healthy from the start, nothing more to do.
		c.record(ctx, t, t.p.probe(ctx))
		<-ctx.Done()
		return
	}
	rng := rand.New(rand.NewPCG(c.seed, keyHash(t.Key)))
	wait := firstDelay(rng, t.Check.Interval)
	var start time.Time
	for {
		timer := c.opts.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case start = <-timer.C(): // the due time: the schedule does not drift with wake-up latency
		}
		began := time.Now() // probe timeouts run on real time, so does their latency
		r := t.p.probe(ctx)
		r.Latency = time.Since(began)
		if ctx.Err() != nil {
			return // removed or stopped mid-probe: the result means nothing
		}
		c.record(ctx, t, r)
		wait = start.Add(nextPeriod(rng, t.Check.Interval)).Sub(c.opts.Clock.Now())
		if wait < 0 {
			wait = 0 // the probe outlasted the period: probe again at once
		}
	}
}

// record feeds r to t's tracker and reports a change.
func (c *Checker) record(ctx context.Context, t *target, r Result) {
	now := c.opts.Clock.Now()
	t.mu.Lock()
	changed := t.tr.observe(r, now)
	st := t.tr.st
	t.mu.Unlock()
	if !changed || c.opts.OnChange == nil {
		return
	}
	c.emit.Lock()
	defer c.emit.Unlock()
	if ctx.Err() == nil { // not after the Remove/Set/Stop that cancelled it
		c.opts.OnChange(st)
	}
}

// keyHash separates the random streams of the targets of one Checker, so
// a target's schedule depends only on the seed and its key, not on the
// order targets were added in.
func keyHash(k Key) uint64 {
	h := fnv.New64a()
	h.Write([]byte(k.Rule))
	h.Write([]byte{0})
	b, _ := k.Backend.MarshalBinary()
	h.Write(b)
	return h.Sum64()
}

// firstDelay spreads the first probes of all targets uniformly over one
// interval, so that a thousand backends added at once are not probed at
// once.
func firstDelay(rng *rand.Rand, interval time.Duration) time.Duration {
	return time.Duration(rng.Int64N(int64(interval)))
}

// nextPeriod is interval ± interval×JitterFraction: probes that happen to
// fall together drift apart again.
func nextPeriod(rng *rand.Rand, interval time.Duration) time.Duration {
	j := int64(float64(interval) * JitterFraction)
	if j <= 0 {
		return interval
	}
	return interval + time.Duration(rng.Int64N(2*j+1)-j)
}
