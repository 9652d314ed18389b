package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
)

// defaultListLimit is conntrack list's default --limit.
const defaultListLimit = 1000

// filter resolves a conntrack query's rule and backend to slots.
func (o *ops) filter(ctx context.Context, q control.ConntrackQuery) (conntrack.Filter, error) {
	var f conntrack.Filter
	if q.Rule == "" {
		return f, nil
	}
	var addr netip.Addr
	if q.Backend != "" {
		a, err := netip.ParseAddr(q.Backend)
		if err != nil {
			return f, control.BadRequest("conntrack: backend %q is not an IP address", q.Backend)
		}
		addr = a.Unmap()
	}
	var ferr error
	err := o.d.do(ctx, func() {
		slot, ok := o.d.reg.rules[q.Rule]
		if !ok {
			ferr = control.BadRequest("conntrack: no rule %q", q.Rule)
			return
		}
		f.ByRule, f.Rule = true, slot
		if q.Backend != "" {
			b, ok := o.d.reg.backends[q.Rule][addr]
			if !ok {
				ferr = control.BadRequest("conntrack: rule %q has no backend %s", q.Rule, addr)
				return
			}
			f.ByBackend, f.Backend = true, b
		}
	})
	if err != nil {
		return f, err
	}
	return f, ferr
}

// slotNames names the rule and backend slots of listed entries: from the
// published snapshot, which names every rule and backend it holds, so a
// listing costs its entries and does not wait for the control goroutine;
// only slots the snapshot no longer holds (a removed backend or rule whose
// entries remain) are looked up in the registry, on the control goroutine,
// walking the rules named and the backends of those rules alone. A slot
// never names anything else (registry.go), so the two sources agree.
type slotNames struct {
	rules    map[uint16]string
	backends map[[2]uint32]string
}

// names resolves the slots of recs (which names already holds are kept).
func (o *ops) names(ctx context.Context, snap *dataplane.Snapshot, recs []conntrack.Record, n *slotNames) error {
	if n.rules == nil {
		n.rules, n.backends = map[uint16]string{}, map[[2]uint32]string{}
	}
	var missing [][2]uint32
	for _, r := range recs {
		k := [2]uint32{uint32(r.Rule), r.Value.Backend}
		if _, ok := n.backends[k]; ok {
			continue
		}
		var rule, backend string
		if snap != nil && int(r.Rule) < len(snap.Rules) {
			sr := snap.Rules[r.Rule]
			if sr.Present {
				rule = sr.Name
			}
			if int(r.Value.Backend) < len(sr.Backends) && sr.Backends[r.Value.Backend].Present {
				backend = sr.Backends[r.Value.Backend].Name
			}
		}
		if rule == "" || backend == "" {
			missing = append(missing, k)
			continue
		}
		n.rules[r.Rule], n.backends[k] = rule, backend
	}
	if len(missing) == 0 {
		return nil
	}
	return o.d.do(ctx, func() {
		want := map[uint16]bool{}
		for _, k := range missing {
			want[uint16(k[0])] = true
		}
		for name, s := range o.d.reg.rules {
			if !want[s] {
				continue
			}
			n.rules[s] = name
			for addr, b := range o.d.reg.backends[name] {
				n.backends[[2]uint32{uint32(s), b}] = addr.String()
			}
		}
	})
}

// Conntrack implements control.API.
func (o *ops) Conntrack(ctx context.Context, q control.ConntrackQuery) (*control.ConntrackResult, error) {
	f, err := o.filter(ctx, q)
	if err != nil {
		return nil, err
	}
	e := o.d.engine
	if e == nil {
		return nil, errors.New("conntrack: the data plane is not running")
	}
	sessions, _ := e.Shared()
	now := conntrack.Now(o.d.clock)
	res := &control.ConntrackResult{Entries: []control.ConntrackRow{}}
	switch q.Op {
	case control.ConntrackCount:
		for _, qs := range e.Stats() {
			n, err := qs.Conntrack.Count(ctx, f)
			if err != nil {
				return nil, fmt.Errorf("queue %d: %w", qs.Queue, err)
			}
			res.Count += n
		}
		res.Count += sessions.Count(f, now)
	case control.ConntrackFlush:
		for _, qs := range e.Stats() {
			n, err := qs.Conntrack.Flush(ctx, f)
			res.Count += n
			if err != nil {
				return nil, fmt.Errorf("queue %d (flushed %d so far): %w", qs.Queue, res.Count, err)
			}
		}
		res.Count += sessions.Flush(f)
		o.d.log.Info("conntrack flushed by the CLI", "rule", q.Rule, "backend", q.Backend, "entries", res.Count, "by", control.PeerFrom(ctx).String())
	case control.ConntrackList:
		limit := q.Limit
		if limit == 0 {
			limit = defaultListLimit
		}
		snap := e.Snapshot()
		var names slotNames
		add := func(queue int, recs []conntrack.Record) error {
			recs = recs[:min(len(recs), max(0, limit-len(res.Entries)))]
			if err := o.names(ctx, snap, recs, &names); err != nil {
				return err
			}
			for _, r := range recs {
				be := names.backends[[2]uint32{uint32(r.Rule), r.Value.Backend}]
				if be == "" {
					be = "slot " + strconv.Itoa(int(r.Value.Backend))
				}
				res.Entries = append(res.Entries, control.ConntrackRow{
					Queue: queue, Rule: names.rules[r.Rule], Key: r.Key.String(), Backend: be,
					Unconfirmed: r.Unconfirmed, ExpiresIn: r.ExpiresIn.Duration().Round(time.Second).String(),
					Stale: snap == nil || !snap.EntryValid(r.Rule, r.Value, r.Key.Proto, now),
				})
			}
			return nil
		}
		for _, qs := range e.Stats() {
			recs, matched, err := qs.Conntrack.List(ctx, f, min(limit, qs.Conntrack.Cap()))
			if err != nil {
				return nil, fmt.Errorf("queue %d: %w", qs.Queue, err)
			}
			res.Count += matched
			if err := add(qs.Queue, recs); err != nil {
				return nil, err
			}
		}
		shared := sessions.List(f, now, sessions.Cap())
		res.Count += len(shared)
		if err := add(-1, shared); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// connCounts are tracked entries per (rule slot, backend slot) that still
// decide: active and inactive ones of the per-queue tables (conntrack
// Tally, summed over the queues), and PER_SESSION sessions of the shared
// table, of which sessionsActive carried a packet within their rule's
// window (sessions.go).
type connCounts struct {
	tally                  [][][2]int // [rule slot][backend slot]{active, inactive}; nil: a rule not counted
	shared, sessionsActive map[[2]uint32]int
	ok                     bool // every queue answered
}

// tallied returns k's active and inactive entries of the per-queue tables.
func (c *connCounts) tallied(k [2]uint32) (active, inactive int) {
	if int(k[0]) < len(c.tally) && int(k[1]) < len(c.tally[k[0]]) {
		n := c.tally[k[0]][k[1]]
		return n[0], n[1]
	}
	return 0, 0
}

// of returns the active and inactive entries of k: its connections in the
// per-queue tables plus its sessions in the shared table (a rule has one
// or the other, sharedSessions).
func (c *connCounts) of(k [2]uint32) (active, inactive int) {
	active, inactive = c.tallied(k)
	return active + c.sessionsActive[k], inactive + c.shared[k] - c.sessionsActive[k]
}

// countConnections tallies every queue's table (a walk on each worker,
// spread over its batches, allocating nothing there) for the rules given
// (nil: every rule; the entries of others are not counted, so a read of
// one rule allocates one rule's counts) and lists the shared session
// table. Safe from any goroutine.
func (d *daemon) countConnections(ctx context.Context, rules []*ruleStatus) connCounts {
	c := connCounts{shared: map[[2]uint32]int{}, sessionsActive: map[[2]uint32]int{}, ok: true}
	e := d.engine
	snap := e.Snapshot()
	if snap == nil {
		c.ok = false
		return c
	}
	// Only entries that still decide count: a drained backend's entries
	// stay in the tables after its deadline until they idle out.
	now := conntrack.Now(d.clock)
	valid := func(rule uint16, v conntrack.Value, proto uint8) bool { return snap.EntryValid(rule, v, proto, now) }
	counted := func(yield func(slot int) bool) {
		if rules == nil {
			for ri := range snap.Rules {
				if !yield(ri) {
					return
				}
			}
			return
		}
		for _, rs := range rules {
			if int(rs.Slot) < len(snap.Rules) && !yield(int(rs.Slot)) {
				return
			}
		}
	}
	stats := e.Stats()
	tallies := make([]conntrack.Tally, len(stats))
	errs := make([]error, len(stats))
	var wg sync.WaitGroup
	for i, qs := range stats {
		t := &tallies[i]
		t.Valid = valid
		t.Counts = make([][][2]int, len(snap.Rules))
		for ri := range counted {
			t.Counts[ri] = make([][2]int, len(snap.Rules[ri].Backends))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = qs.Conntrack.Tally(ctx, t)
		}()
	}
	wg.Wait()
	// The queues' counts are summed into the first that answered.
	for i := range tallies {
		if errs[i] != nil {
			c.ok = false
			continue
		}
		if c.tally == nil {
			c.tally = tallies[i].Counts
			continue
		}
		for ri, bs := range tallies[i].Counts {
			for bi, n := range bs {
				c.tally[ri][bi][0] += n[0]
				c.tally[ri][bi][1] += n[1]
			}
		}
	}
	sessions, _ := e.Shared()
	splitSessions(&c, sessions.List(conntrack.Filter{}, now, sessions.Cap()), snap.Rules, valid) // sessions.go
	return c
}
