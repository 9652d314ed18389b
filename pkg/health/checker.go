package health

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Checker probes a set of targets, each on its own schedule, and reports
// changes to Options.OnChange. Its methods are safe for concurrent use.
// One scheduler goroutine starts every probe when it is due (doc.go,
// "Ownership and threading").
type Checker struct {
	opts       Options // defaults filled in
	seed       uint64
	realClock  bool // the connector needs it: it ends connections on the scheduler's rounds
	directDial bool // Options.Dial was nil: every target's probes go direct

	root   context.Context // cancelled by Stop
	cancel context.CancelFunc

	reload sync.Mutex // serialises Set, Add, Remove and Stop (held while probes end)

	// mu guards targets, queue, stopped and the schedule fields of every
	// target; it is held only briefly, never across a probe or OnChange.
	mu      sync.Mutex
	idle    sync.Cond // on mu: a probe has ended
	targets map[Key]*target
	queue   timeHeap[*target] // targets waiting for their next probe, earliest first
	stopped bool

	wake  chan struct{} // the queue's head changed: the scheduler looks again
	emit  sync.Mutex    // one OnChange call at a time
	conns *connector    // connect-only TCP probes; nil until the first (under mu)

	probes  sync.WaitGroup // probes in flight
	loops   sync.WaitGroup // the scheduler and the connector
	started atomic.Uint64  // probes started since New

	// The bound on probes in flight (doc.go, "Decisions"). running and
	// heldAt are under mu.
	maxInFlight int
	running     int           // probes in flight that hold a socket (all but NONE)
	heldAt      time.Time     // the latest round that left due probes to the next
	late        atomic.Uint64 // probes started after a round that held them back

	// The scheduler's alone: what Options.OnLate was last told, and when.
	lateReported uint64
	lateReportAt time.Time
}

// target is one prober: its configuration, its schedule and its state.
type target struct {
	Target
	p    *prober
	fast bool       // connect-only TCP through the connector
	rng  *rand.Rand // the schedule's random stream (under Checker.mu)

	ctx    context.Context // cancelled when the target is removed
	cancel context.CancelFunc

	// Under Checker.mu:
	due     time.Time // when the next probe is due
	index   int       // in Checker.queue; -1 while a probe runs or after removal
	busy    bool      // a probe is in flight
	removed bool

	mu sync.Mutex // guards tr: written when a probe ends, read by Status
	tr tracker
}

// New returns a Checker with no targets.
func New(opts Options) *Checker {
	c := &Checker{seed: opts.Seed, realClock: opts.Clock == nil, directDial: opts.Dial == nil, targets: make(map[Key]*target), wake: make(chan struct{}, 1)}
	if opts.Dial == nil {
		opts.Dial = DirectDial
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	c.opts = opts
	c.maxInFlight = opts.MaxInFlight
	if c.maxInFlight <= 0 {
		c.maxInFlight = defaultMaxInFlight()
	}
	if c.seed == 0 {
		c.seed = rand.Uint64()
	}
	c.idle.L = &c.mu
	c.root, c.cancel = context.WithCancel(context.Background())
	c.loops.Add(1)
	go c.schedule()
	return c
}

// Set makes targets the whole set of probed targets (a reload): new ones
// start, missing ones stop, and those whose check changed restart on the
// new check while keeping their state (health, weight and streaks). The
// others go on untouched. Nothing changes if a target is invalid or
// listed twice.
func (c *Checker) Set(targets []Target) error { return c.set(nil, targets) }

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

// Remove stops probing k and waits for its probe in flight, if any, to
// end; it reports whether k was probed.
func (c *Checker) Remove(k Key) bool {
	c.reload.Lock()
	defer c.reload.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.targets[k]
	if ok {
		c.stopTargets([]*target{t})
		delete(c.targets, k)
	}
	return ok
}

// Stop stops every prober and waits for the probes in flight. Later calls
// to Set and Add return ErrStopped; Stop may be called again.
func (c *Checker) Stop() {
	c.reload.Lock()
	defer c.reload.Unlock()
	c.mu.Lock()
	c.stopped = true
	all := make([]*target, 0, len(c.targets))
	for _, t := range c.targets {
		all = append(all, t)
	}
	c.stopTargets(all)
	c.mu.Unlock()
	c.cancel()
	c.probes.Wait()
	c.loops.Wait()
}

// Probes returns how many probes the Checker has started since New.
func (c *Checker) Probes() uint64 { return c.started.Load() }

// Late returns how many probes have started late since New because the
// bound on probes in flight held them back a round or more.
func (c *Checker) Late() uint64 { return c.late.Load() }

// MaxInFlight returns the bound on probes in flight (Options.MaxInFlight,
// or the default derived from the open-file limit).
func (c *Checker) MaxInFlight() int { return c.maxInFlight }

// defaultMaxInFlight is half the process's open-file limit: the soft
// limit of RLIMIT_NOFILE, which Go raises to the hard one at start. The
// other half is the daemon's own (control connections, rule files,
// netlink, AF_XDP and BGP sockets, a reload's second set of them); a
// limit that cannot be read gives the bound of the usual default limit,
// 1024.
func defaultMaxInFlight() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < 2 {
		return 512
	}
	return int(min(lim.Cur/2, 1<<20))
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

// StatusOf returns the status of the target k (false: not probed), as
// Status would, without copying every target's.
func (c *Checker) StatusOf(k Key) (Status, bool) {
	c.mu.Lock()
	t := c.targets[k]
	c.mu.Unlock()
	if t == nil {
		return Status{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tr.st, true
}

// stopTargets stops ts: out of the queue, their probes in flight cut
// short, and waits (releasing c.mu meanwhile) until those have ended, so
// that no OnChange call for them starts afterwards. They stay in
// c.targets (Status after Stop shows them); Set and Remove delete them.
// c.mu is held.
func (c *Checker) stopTargets(ts []*target) {
	for _, t := range ts {
		t.removed = true
		t.cancel()
		if t.index >= 0 {
			heap.Remove(&c.queue, t.index)
		}
		if t.busy && t.fast {
			c.conns.expire(t)
		}
	}
	for _, t := range ts {
		for t.busy {
			c.idle.Wait()
		}
	}
}

// start adds t with its first probe at a seeded offset in [0, interval);
// prev, if not nil, is the state to carry over from the target it
// replaces, else t.From the verdict to start from. c.mu is held.
func (c *Checker) start(t Target, prev *tracker) {
	rise, fall := t.Check.HealthyThreshold, t.Check.UnhealthyThreshold
	if t.Check.Kind == NoProbe {
		rise, fall = 1, 1
	}
	now := c.opts.Clock.Now()
	dial := c.opts.Dial
	if t.Check.Direct {
		dial = DirectDial
	}
	tg := &target{
		Target: t,
		p:      newProber(t, dial, c.opts.TLS),
		rng:    rand.New(rand.NewPCG(c.seed, keyHash(t.Key))),
		tr:     newTracker(t.Key, rise, fall, now),
	}
	tg.fast = c.realClock && (c.directDial || t.Check.Direct) && tg.p.connectOnly()
	if tg.fast && c.conns == nil {
		c.conns = newConnector(c)
	}
	if prev != nil {
		tg.tr.successes, tg.tr.failures, tg.tr.st = prev.successes, prev.failures, prev.st
	} else if f := t.From; f != nil && t.Check.Kind != NoProbe {
		st := &tg.tr.st
		st.Health, st.Weight, st.WeightState, st.Since = f.Health, f.Weight, f.WeightState, f.Since
	}
	tg.ctx, tg.cancel = context.WithCancel(c.root)
	tg.due = now // NONE: "probed" at once, and never again
	if t.Check.Kind != NoProbe {
		tg.due = now.Add(firstDelay(tg.rng, t.Check.Interval))
	}
	c.targets[t.Key] = tg
	c.enqueue(tg)
}

// enqueue puts t in the queue and wakes the scheduler when t is its new
// head. c.mu is held.
func (c *Checker) enqueue(t *target) {
	heap.Push(&c.queue, t)
	if t.index == 0 {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// schedulerTick is the least time between two rounds of the scheduler
// that start probes: at 2000 probes/s it wakes 50 times a second rather
// than 2000 (each wake-up costs about as much as a probe's system calls,
// bench/README.md), and a probe starts at most this late.
const schedulerTick = 20 * time.Millisecond

// schedule is the scheduler goroutine: it sleeps until the earliest due
// time (but at least schedulerTick after it last started probes) and
// starts every probe that is due, up to the bound on probes in flight:
// the connector's on this goroutine, the others on a goroutine each. Due
// probes over the bound wait for the next round, earliest first. While
// the connector has connections in flight it also wakes every
// schedulerTick (or at their deadline) to end those that are done.
func (c *Checker) schedule() {
	defer c.loops.Done()
	var due []*target
	var done []ended
	for {
		c.mu.Lock()
		now := c.opts.Clock.Now()
		due = due[:0]
		held := false
		for len(c.queue) > 0 && !c.queue[0].due.After(now) {
			t := c.queue[0]
			if t.Check.Kind != NoProbe { // NONE holds no socket
				if c.running >= c.maxInFlight {
					held = true
					break
				}
				c.running++
			}
			heap.Pop(&c.queue)
			if !t.due.After(c.heldAt) {
				c.late.Add(1) // it was due in a round that held it back
			}
			t.busy = true
			c.probes.Add(1)
			c.started.Add(1)
			due = append(due, t)
		}
		wait := time.Duration(-1)
		switch {
		case held:
			c.heldAt = now
			wait = schedulerTick
		case len(c.queue) > 0:
			wait = c.queue[0].due.Sub(now)
		}
		conns := c.conns
		c.mu.Unlock()
		c.reportLate(now)
		for i, t := range due {
			if t.fast {
				conns.start(t, now)
			} else {
				go c.probe(t)
			}
			due[i] = nil
		}
		if len(due) > 0 && wait >= 0 && wait < schedulerTick {
			wait = schedulerTick
		}
		if conns != nil {
			// Most connects of this round are done already.
			done = conns.harvest(time.Now(), done)
			for i, e := range done {
				c.finish(e.t, e.r)
				done[i] = ended{}
			}
			done = done[:0]
			if inflight, deadline := conns.pending(); inflight {
				poll := min(schedulerTick, max(0, time.Until(deadline)))
				if wait < 0 || poll < wait {
					wait = poll
				}
			}
		}
		var timer Timer
		var fired <-chan time.Time
		if wait >= 0 {
			timer = c.opts.Clock.NewTimer(wait)
			fired = timer.C()
		}
		select {
		case <-fired:
		case <-c.wake:
		case <-c.root.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if c.root.Err() != nil {
			if conns != nil {
				conns.close()
			}
			return
		}
	}
}

// reportLate tells Options.OnLate how many probes started late since its
// last call: at once the first time, then at most once per
// LateReportEvery. Called by the scheduler.
func (c *Checker) reportLate(now time.Time) {
	late := c.late.Load()
	if c.opts.OnLate == nil || late == c.lateReported {
		return
	}
	if !c.lateReportAt.IsZero() && now.Sub(c.lateReportAt) < LateReportEvery {
		return
	}
	c.opts.OnLate(late-c.lateReported, c.maxInFlight)
	c.lateReported, c.lateReportAt = late, now
}

// probe runs one probe of t on its own goroutine.
func (c *Checker) probe(t *target) {
	began := time.Now() // probe timeouts run on real time, so does their latency
	r := t.p.probe(t.ctx)
	r.Latency = time.Since(began)
	c.finish(t, r)
}

// finish records the result of t's probe and queues its next one, one
// period after the due time of this one (or at once when the probe
// outlasted the period). A probe cut short by Remove, Set or Stop is
// discarded.
func (c *Checker) finish(t *target, r Result) {
	if t.ctx.Err() == nil {
		c.record(t, r)
	}
	c.mu.Lock()
	t.busy = false
	if t.Check.Kind != NoProbe {
		c.running--
	}
	if !t.removed && t.Check.Kind != NoProbe {
		t.due = t.due.Add(nextPeriod(t.rng, t.Check.Interval))
		if now := c.opts.Clock.Now(); t.due.Before(now) {
			t.due = now
		}
		c.enqueue(t)
	}
	c.idle.Broadcast()
	c.mu.Unlock()
	c.probes.Done()
}

// record feeds r to t's tracker and reports a change.
func (c *Checker) record(t *target, r Result) {
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
	if t.ctx.Err() == nil { // not after the Remove/Set/Stop that cancelled it
		c.opts.OnChange(st)
	}
}

// timeHeap is a min-heap by time (container/heap) of items that keep
// their own index, so heap.Fix and heap.Remove find them: the targets by
// due time, the connector's connections by deadline.
type timeHeap[T timed] []T

type timed interface {
	when() time.Time
	setIndex(int) // -1 once out of the heap
}

func (q timeHeap[T]) Len() int           { return len(q) }
func (q timeHeap[T]) Less(i, j int) bool { return q[i].when().Before(q[j].when()) }
func (q timeHeap[T]) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].setIndex(i)
	q[j].setIndex(j)
}
func (q *timeHeap[T]) Push(x any) {
	it := x.(T)
	it.setIndex(len(*q))
	*q = append(*q, it)
}
func (q *timeHeap[T]) Pop() any {
	old := *q
	it := old[len(old)-1]
	var zero T
	old[len(old)-1] = zero
	*q = old[:len(old)-1]
	it.setIndex(-1)
	return it
}

func (t *target) when() time.Time { return t.due }
func (t *target) setIndex(i int)  { t.index = i }

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
