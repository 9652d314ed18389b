package conntrack

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/xlbnet/xlb/hash"
)

// Filter selects entries for Control.Count, List and Flush. The zero
// Filter selects every entry.
type Filter struct {
	ByRule    bool
	Rule      uint16
	ByBackend bool
	Backend   uint32
}

func (f *Filter) match(rule uint16, backend uint32) bool {
	return (!f.ByRule || rule == f.Rule) && (!f.ByBackend || backend == f.Backend)
}

// Record is one listed entry.
type Record struct {
	Key         hash.Key
	Rule        uint16
	Value       Value
	Unconfirmed bool  // new: its flow's next packet (other than a SYN) not seen yet
	Closed      bool  // a FIN or RST was seen (CloseAt): inactive
	Exception   bool  // MarkException: its backend is not what its rule's table picks now
	FromPeer    bool  // MarkFromPeer: made from a fleet peer's entry
	ExpiresIn   Ticks // time left before the entry expires, as of the walk
}

// record makes the Record of slot i of b at now.
func (b *bucket) record(i int, now Time) Record {
	e, f := &b.slots[i], b.flags[i]
	return Record{
		Key: e.key, Rule: e.rule, Value: e.Value(),
		Unconfirmed: f&flagUnconfirmed != 0,
		Closed:      f&flagClosed != 0,
		Exception:   f&flagException != 0,
		FromPeer:    f&flagFromPeer != 0,
		ExpiresIn:   Ticks(max(b.expires[i].Sub(now), 0)),
	}
}

type op uint8

const (
	opCount op = iota
	opList
	opFlush
	opStats
	opGet
	opTally
)

// request is one Control call in flight. The requester fills the inputs,
// the worker the outputs, and closing done publishes the outputs back.
type request struct {
	op     op
	filter Filter
	key    hash.Key // opGet, with filter.Rule

	cursor  int      // next slot to examine (worker-owned)
	out     []Record // opList: pre-sized by the requester, filled up to cap
	tally   *Tally   // opTally: sized by the requester
	matched int
	stats   Stats
	done    chan struct{}
}

// Control is the off-path handle of a Table for the CLI and metrics: list,
// count and flush by rule or backend, counters and the entry count. Its
// methods are safe for concurrent use from any goroutine except the
// table's worker (which would wait for itself).
//
// Protocol: a caller takes Control's mutex, publishes its request with one
// atomic store into the table's mailbox, and waits for the request's done
// channel. The worker calls Table.Serve between batches; Serve makes one
// atomic load and, when a request is pending, works on it for a bounded
// number of slots, so a request over a large table is spread over many
// batches and never stalls one. When the walk is complete the worker
// clears the mailbox (compare-and-swap) and closes done; the channel close
// orders the worker's writes before the caller's reads. A posted request
// rings the table's doorbell (SetDoorbell), for a worker that sleeps while
// its queue is idle, and the worker does not sleep while one is Pending. A caller whose
// context ends withdraws its request by compare-and-swapping the mailbox
// back to nil and returns; a flush it withdrew may have been partly done.
// A walk is not a snapshot: entries inserted or removed by the worker
// between two batches of the walk may or may not be seen.
type Control struct {
	mu sync.Mutex
	t  *Table
}

// Control returns the table's off-path handle.
func (t *Table) Control() *Control { return &t.control }

// Len returns the number of slots in use as of the worker's last Serve or
// Sweep (at most one batch old while the worker runs). It makes one atomic
// load.
func (c *Control) Len() int { return int(c.t.published.Load()) }

// Cap returns the table's number of slots.
func (c *Control) Cap() int { return c.t.Cap() }

// ErrLimit says a List limit is out of range.
var ErrLimit = errors.New("list limit out of range")

// Count returns how many live entries f selects.
func (c *Control) Count(ctx context.Context, f Filter) (int, error) {
	r := &request{op: opCount, filter: f}
	if err := c.do(ctx, r); err != nil {
		return 0, fmt.Errorf("count conntrack entries: %w", err)
	}
	return r.matched, nil
}

// List returns up to limit live entries that f selects, and how many it
// selects in all.
func (c *Control) List(ctx context.Context, f Filter, limit int) ([]Record, int, error) {
	if limit < 0 || limit > c.t.Cap() {
		return nil, 0, fmt.Errorf("list conntrack entries: %w: %d", ErrLimit, limit)
	}
	r := &request{op: opList, filter: f, out: make([]Record, 0, limit)}
	if err := c.do(ctx, r); err != nil {
		return nil, 0, fmt.Errorf("list conntrack entries: %w", err)
	}
	return r.out, r.matched, nil
}

// Flush removes the entries f selects (expired or not) and returns how
// many it removed.
func (c *Control) Flush(ctx context.Context, f Filter) (int, error) {
	r := &request{op: opFlush, filter: f}
	if err := c.do(ctx, r); err != nil {
		return 0, fmt.Errorf("flush conntrack entries: %w", err)
	}
	return r.matched, nil
}

// Get returns the live entry of (k, rule), if there is one, without
// changing it (no refresh, no confirmation): one probe on the worker's
// next pass, not a walk of the table.
func (c *Control) Get(ctx context.Context, k hash.Key, rule uint16) (Record, bool, error) {
	r := &request{op: opGet, key: k, filter: Filter{ByRule: true, Rule: rule}, out: make([]Record, 0, 1)}
	if err := c.do(ctx, r); err != nil {
		return Record{}, false, fmt.Errorf("get conntrack entry: %w", err)
	}
	if len(r.out) == 0 {
		return Record{}, false, nil
	}
	return r.out[0], true, nil
}

// Tally counts live entries per rule and backend slot, as active (open)
// or inactive (closed by a FIN or RST, or still an unconfirmed SYN: IPVS
// counts a connection that has not been established as inactive too).
// The requester sizes Counts; the worker only increments what is there.
type Tally struct {
	// Counts[rule][backend] is {active, inactive}. Entries of a rule or
	// backend beyond it are counted in Other.
	Counts [][][2]int
	Other  int
	// Valid, when set, says whether an entry still decides (the
	// dataplane's snapshot.EntryValid at the walk's time); entries it
	// rejects are not counted. It runs on the worker: it must not block
	// or allocate.
	Valid func(rule uint16, v Value, proto uint8) bool
}

// Tally walks the table and adds its live entries to t. The walk
// allocates nothing on the worker; on an error t is incomplete and must
// not be read while the worker may still write it (the request was
// withdrawn: it is not).
func (c *Control) Tally(ctx context.Context, t *Tally) error {
	r := &request{op: opTally, tally: t}
	if err := c.do(ctx, r); err != nil {
		return fmt.Errorf("tally conntrack entries: %w", err)
	}
	return nil
}

func (t *Tally) add(e *Entry, flags uint8) {
	if t.Valid != nil && !t.Valid(e.rule, e.Value(), e.key.Proto) {
		return
	}
	if int(e.rule) >= len(t.Counts) || int(e.backend) >= len(t.Counts[e.rule]) {
		t.Other++
		return
	}
	inactive := 0
	if flags&(flagClosed|flagSYN) != 0 { // closing, or not yet established
		inactive = 1
	}
	t.Counts[e.rule][e.backend][inactive]++
}

// Stats returns a copy of the table's counters as of one worker batch.
func (c *Control) Stats(ctx context.Context) (Stats, error) {
	r := &request{op: opStats}
	if err := c.do(ctx, r); err != nil {
		return Stats{}, fmt.Errorf("read conntrack stats: %w", err)
	}
	return r.stats, nil
}

func (c *Control) do(ctx context.Context, r *request) error {
	r.done = make(chan struct{})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	c.t.mail.Store(r)
	if ring := c.t.doorbell.Load(); ring != nil {
		(*ring)()
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		if c.t.mail.CompareAndSwap(r, nil) {
			return ctx.Err()
		}
		// The worker finished in the meantime.
		<-r.done
		return nil
	}
}

// SetDoorbell makes every Control request wake the table's worker with
// ring once it is posted, so a worker asleep on an idle queue answers at
// once (nil: no doorbell). Safe beside Control calls.
func (t *Table) SetDoorbell(ring func()) {
	if ring == nil {
		t.doorbell.Store(nil)
		return
	}
	t.doorbell.Store(&ring)
}

// Pending says whether a Control request waits for the worker: an idle
// worker does not sleep while one does, so a walk over many of its loops
// runs them back to back. One atomic load.
func (t *Table) Pending() bool { return t.mail.Load() != nil }

// Serve publishes the entry count and works on a pending Control request
// for at most budget slots. The worker calls it once between batches; it
// costs one atomic store and one atomic load when nothing is pending.
func (t *Table) Serve(now Time, budget int) {
	t.published.Store(int64(t.n))
	r := t.mail.Load()
	if r == nil {
		return
	}
	switch r.op {
	case opStats:
		r.stats = t.stats
		t.finish(r)
		return
	case opGet:
		if rec, ok := t.peek(&r.key, r.filter.Rule, now); ok {
			r.out = append(r.out, rec)
		}
		t.finish(r)
		return
	}
	total := len(t.buckets) * Ways
	end := min(r.cursor+max(budget, 1), total)
	for c := r.cursor; c < end; c++ {
		b := &t.buckets[c/Ways]
		i := c % Ways
		if b.tags[i] == 0 {
			continue
		}
		e := &b.slots[i]
		if !r.filter.match(e.rule, e.backend) {
			continue
		}
		if r.op != opFlush && !now.Before(b.expires[i]) {
			continue // expired, waiting for Sweep or a Lookup to reclaim it
		}
		switch r.op {
		case opCount:
			r.matched++
		case opList:
			r.matched++
			if len(r.out) < cap(r.out) {
				r.out = append(r.out, b.record(i, now))
			}
		case opTally:
			r.tally.add(e, b.flags[i])
		case opFlush:
			b.clear(i)
			t.n--
			t.stats.Flushed++
			r.matched++
		}
	}
	r.cursor = end
	if end == total {
		t.published.Store(int64(t.n))
		t.finish(r)
	}
}

func (t *Table) finish(r *request) {
	if t.mail.CompareAndSwap(r, nil) {
		close(r.done)
	}
}

// peek finds the live entry of (k, rule) and changes nothing (worker only).
func (t *Table) peek(k *hash.Key, rule uint16, now Time) (Record, bool) {
	p := t.Locate(k, rule)
	for _, b := range [2]*bucket{&t.buckets[p.b1], &t.buckets[p.b2]} {
		i := b.find(p.tag, k, rule)
		if i < 0 || !now.Before(b.expires[i]) {
			continue
		}
		return b.record(i, now), true
	}
	return Record{}, false
}
