package daemon

// # Operations (the control API's implementation)
//
// ops implements control.API for a running Daemon; ControlHandler wraps
// it in control.NewHandler and startControl serves it on control_socket.
//
// Goroutines. Every request runs on its http.Server goroutine. What the
// control goroutine owns (configuration, overlay, view, slot registry,
// probe verdicts, next hops) is read or changed only inside d.do, which
// runs a function on the control goroutine; the functions are short and
// never wait for a worker. Conntrack requests then go to the workers
// through their tables' Control handles (conntrack.Control: a mailbox the
// worker serves between batches) from the request's goroutine, so a slow
// walk never blocks the control loop, and the shared tables are walked
// directly (they are built for concurrent readers). The data-plane
// snapshot is read through its atomic pointer.
//
// Changes. A backend change edits the overlay, saves it (atomically) and
// only then recomputes and publishes; the reply is sent after the
// publication, so an acknowledged change survives a crash and is in force.
// A save that fails restores the overlay from the file (unchanged by the
// failed atomic write) and the request fails; nothing is published. A
// change that changes nothing (draining a drained backend) is not saved.
//
// Decisions where DESIGN is silent:
//   - control_socket is read when Run starts; a reload that changes it
//     does not move the socket (restart xlb).
//   - Tracked connections per backend are counted with one List walk per
//     queue (conntrack.Control offers per-filter Count only, one table walk
//     per backend) plus one walk of the shared session table; the walks are
//     spread over the workers' batches by the conntrack mailbox.
//   - Packets/s per backend are the difference of two samples of the
//     workers' per-backend counters: the previous request's sample when it
//     is 0.5-60 s old, otherwise two samples 0.5 s apart (the first status
//     after a pause takes half a second longer). The workers count per
//     backend in dataplane.BackendStats, at most one batch behind.
//   - lookup answers for an established packet (ACK) by default, --syn for
//     a connection's first SYN. It searches every queue's table for the
//     tracking key (the queue a flow lands on is the NIC's RSS choice,
//     unknown here) with one probe per queue (conntrack Control.Get), and
//     the shared session table directly; a queue that does not answer
//     makes it say the entry was not checked.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/packet"
)

// defaultListLimit is conntrack list's default --limit.
const defaultListLimit = 1000

// ops is the control API of one daemon.
type ops struct {
	d *Daemon

	mu   sync.Mutex // guards last
	last *sample
}

// ControlHandler returns the HTTP handler of the control API.
func (d *Daemon) ControlHandler() http.Handler {
	return control.NewHandler(&ops{d: d})
}

// startControl serves the control API on the configured socket until the
// returned stop is called (Run defers it, so the socket goes away before
// the data plane does). A socket that cannot be served is logged, not
// fatal: the appliance forwards without its CLI.
func (d *Daemon) startControl(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	path := d.cfg.ControlSocket
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := control.Serve(ctx, path, d.ControlHandler()); err != nil {
			d.log.Error("control socket: the CLI cannot reach this daemon", "socket", path, "err", err)
		}
	}()
	d.log.Info("control socket", "path", path)
	return func() {
		cancel()
		<-done
	}
}

// ruleRows is what a request needs of the control goroutine's state
// about one rule, copied there.
type ruleRows struct {
	name     string
	slot     uint16
	cfg      *config.Rule
	state    *failover.State
	backends []backendRow
}

type backendRow struct {
	view    config.BackendView
	removed bool
	slot    uint32
	nhErr   string
	probe   string // last probe error
	present bool   // has a slot (always, once published)
}

// rows copies the state of every rule (or one) on the control goroutine.
func (o *ops) rows(ctx context.Context, rule string) ([]ruleRows, []string, error) {
	var out []ruleRows
	var stale []string
	found := rule == ""
	err := o.d.do(ctx, func() {
		d := o.d
		for _, s := range d.view.Stale {
			stale = append(stale, s.String())
		}
		for i := range d.view.Rules {
			rv := &d.view.Rules[i]
			if rule != "" && rv.Rule.Name != rule {
				continue
			}
			found = true
			rr := ruleRows{name: rv.Rule.Name, cfg: rv.Rule}
			for _, b := range rv.Backends {
				rr.backends = append(rr.backends, d.row(rv.Rule, b, false))
			}
			if rt := d.rules[rv.Rule.Name]; rt != nil {
				rr.slot, rr.state = rt.slot, rt.prev
				// Backends removed by a reload, still draining.
				gone := slices.SortedFunc(maps.Keys(rt.removed), netip.Addr.Compare)
				for _, addr := range gone {
					rr.backends = append(rr.backends, d.row(rv.Rule, config.BackendView{Addr: addr, Group: rt.removed[addr].group}, true))
				}
			}
			out = append(out, rr)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	if !found {
		return nil, nil, control.BadRequest("no rule %q", rule)
	}
	return out, stale, nil
}

// row runs on the control goroutine.
func (d *Daemon) row(r *config.Rule, b config.BackendView, removed bool) backendRow {
	row := backendRow{view: b, removed: removed}
	if m := d.reg.backends[r.Name]; m != nil {
		row.slot, row.present = m[b.Addr]
	}
	if nh, ok := d.nexthops[nhKey{b.Addr, r.Encap.Type == config.EncapDirect}]; ok && nh.err != nil {
		row.nhErr = nh.err.Error()
	} else if !ok && !removed {
		row.nhErr = "not resolved yet"
	}
	if p, ok := d.probes[probeKey{r.Name, b.Addr}]; ok {
		row.probe = p.lastError
	}
	return row
}

// conns counts tracked entries per (rule slot, backend slot): per-queue
// tables and the shared session table.
type connCounts struct {
	queue, shared map[[2]uint32]int
	ok            bool
}

func (o *ops) countConnections(ctx context.Context) connCounts {
	c := connCounts{queue: map[[2]uint32]int{}, shared: map[[2]uint32]int{}, ok: true}
	e := o.d.engine
	if e == nil {
		c.ok = false
		return c
	}
	stats := e.Stats()
	results := make([][]conntrack.Record, len(stats))
	errs := make([]error, len(stats))
	var wg sync.WaitGroup
	for i, qs := range stats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctl := qs.Conntrack
			limit := min(ctl.Cap(), max(ctl.Len()*2, 1024))
			results[i], _, errs[i] = ctl.List(ctx, conntrack.Filter{}, limit)
		}()
	}
	wg.Wait()
	// Only entries that still decide count: a drained backend's entries
	// stay in the tables after its deadline until they idle out.
	snap := e.Snapshot()
	now := conntrack.Now(o.d.clock)
	valid := func(r *conntrack.Record) bool {
		return snap != nil && snap.EntryValid(r.Rule, r.Value, r.Key.Proto, now)
	}
	for i := range results {
		if errs[i] != nil {
			c.ok = false
		}
		for j := range results[i] {
			if r := &results[i][j]; valid(r) {
				c.queue[[2]uint32{uint32(r.Rule), r.Value.Backend}]++
			}
		}
	}
	sessions, _ := e.Shared()
	recs := sessions.List(conntrack.Filter{}, now, sessions.Cap())
	for j := range recs {
		if r := &recs[j]; valid(r) {
			c.shared[[2]uint32{uint32(r.Rule), r.Value.Backend}]++
		}
	}
	return c
}

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

// Status implements control.API.
func (o *ops) Status(ctx context.Context) (*control.Status, error) {
	st := o.d.Status()
	rules, stale, err := o.rows(ctx, "")
	if err != nil {
		return nil, err
	}
	now, prev := o.rates(ctx)
	conns := o.countConnections(ctx)
	out := &control.Status{
		Config: st.Config, Loaded: st.Loaded, XDPMode: st.XDPMode, ZeroCopy: st.ZeroCopy,
		Queues: st.Queues, Stale: stale, Rules: []control.Rule{},
	}
	secs := 0.0
	if prev != nil {
		secs = now.at.Sub(prev.at).Seconds()
		out.Rates.Seconds = secs
	}
	if e := o.d.engine; e != nil {
		out.Counters.Drops = map[string]uint64{}
		for _, q := range e.Stats() {
			c := q.Counters
			out.Counters.RX += c.RXPackets.Load()
			out.Counters.TX += c.TXPackets.Load()
			out.Counters.Tracked += c.TrackedHit.Load()
			out.Counters.KernelRXD += q.Kernel.RXDropped
			out.Conntrack += q.Conntrack.Len()
			for r := range c.Reasons {
				if n := c.Reasons[r].Load(); n != 0 && dataplane.Reason(r) != dataplane.ReasonNone {
					out.Counters.Drops[dataplane.Reason(r).String()] += n
				}
			}
		}
		if prev != nil {
			out.Counters.RXPerSec = perSecond(now.rx, prev.rx, secs)
		}
	}
	for _, rr := range rules {
		out.Rules = append(out.Rules, o.ruleInfo(rr, conns, now, prev))
		if rr.state != nil {
			for _, ev := range rr.state.History {
				out.Events = append(out.Events, control.RuleEvent{Rule: rr.name, At: ev.At, Kind: ev.Kind.String(), From: tierName(ev.From, ev.Kind), To: tierName(ev.To, ev.Kind), Group: ev.Group, Reason: ev.Reason})
			}
		}
	}
	slices.SortStableFunc(out.Events, func(a, b control.RuleEvent) int { return a.At.Compare(b.At) })
	if len(out.Events) > 20 {
		out.Events = out.Events[len(out.Events)-20:]
	}
	return out, nil
}

func tierName(t failover.Tier, k failover.EventKind) string {
	if k != failover.EventTierSwitch {
		return ""
	}
	return t.String()
}

// Backends implements control.API.
func (o *ops) Backends(ctx context.Context, rule string) ([]control.Backend, error) {
	rules, _, err := o.rows(ctx, rule)
	if err != nil {
		return nil, err
	}
	now, prev := o.rates(ctx)
	conns := o.countConnections(ctx)
	var out []control.Backend
	for _, rr := range rules {
		out = append(out, o.ruleInfo(rr, conns, now, prev).Backends...)
	}
	return out, nil
}

func (o *ops) ruleInfo(rr ruleRows, conns connCounts, now, prev *sample) control.Rule {
	r := rr.cfg
	info := control.Rule{
		Name: r.Name, VIP: r.VIP.String(), Protocol: r.Protocol.String(), Ports: r.Ports.String(),
		Affinity: r.SessionAffinity.String(), Tracking: r.ConnectionTracking.TrackingMode.String(),
		Policy: r.LocalityLBPolicy.String(), Encap: r.Encap.Type.String(), Slot: int(rr.slot),
		Backends: []control.Backend{},
	}
	if rr.state != nil {
		info.Tier, info.Reason, info.Eligible = rr.state.Tier.String(), rr.state.Reason, len(rr.state.Eligible)
	}
	var table *hash.MaglevTable
	if snap := o.d.engine.snapshotOrNil(); snap != nil && int(rr.slot) < len(snap.Rules) && snap.Rules[rr.slot].Present {
		table = snap.Rules[rr.slot].Table
		info.TableSize = table.Size()
	}
	secs := 0.0
	if prev != nil {
		secs = now.at.Sub(prev.at).Seconds()
	}
	for _, br := range rr.backends {
		b := br.view
		row := control.Backend{
			Rule: r.Name, Address: b.Addr.String(), Group: b.Group,
			Role: b.Role.String(), RoleSource: b.RoleSource.String(),
			Admin: "IN_SERVICE", AdminSource: b.DrainedSource.String(),
			WeightConfigured: -1, WeightSource: b.WeightSource.String(),
			Tier: info.Tier, Slot: br.slot, Connections: -1, Packets: -1,
			NextHop: br.nhErr,
		}
		if b.Drained {
			row.Admin = "DRAINED"
			t := b.DrainedAt
			row.DrainedAt = &t
		}
		if br.removed {
			row.Admin, row.AdminSource, row.Role, row.RoleSource, row.WeightSource = "REMOVED", "config", "-", "config", "config"
		}
		if b.HasWeight {
			row.WeightConfigured = int(b.Weight)
		}
		if rr.state != nil {
			if bs, ok := rr.state.Backend(b.Addr.String()); ok {
				row.Health, row.WeightState, row.Usable, row.Eligible = bs.Health.String(), bs.WeightState.String(), bs.Usable, bs.Eligible
				if !bs.DrainUntil.IsZero() {
					t := bs.DrainUntil
					row.DrainUntil = &t
				}
			}
			for _, m := range rr.state.Eligible {
				if m.Name == row.Address {
					row.WeightEffective = m.Weight
				}
			}
		}
		if br.probe != "" && row.Health != failover.HealthHealthy.String() {
			row.Health += " (" + br.probe + ")"
		}
		if table != nil && table.Size() > 0 {
			if n, ok := table.Slots(row.Address); ok {
				row.Share = float64(n) / float64(table.Size())
			}
		}
		if br.present && conns.ok {
			k := [2]uint32{uint32(rr.slot), br.slot}
			row.Connections, row.SessionEntries = conns.queue[k], conns.shared[k]
		}
		if br.present && now != nil && now.backend != nil {
			k := [2]uint32{uint32(rr.slot), br.slot}
			row.Packets = int64(now.backend[k])
			if prev != nil && prev.backend != nil {
				row.PacketsPerSec = perSecond(now.backend[k], prev.backend[k], secs)
			}
		}
		info.Backends = append(info.Backends, row)
	}
	return info
}

// ChangeBackend implements control.API.
func (o *ops) ChangeBackend(ctx context.Context, c control.BackendChange) (*control.BackendChangeResult, error) {
	addr, err := netip.ParseAddr(c.Backend)
	if err != nil {
		return nil, control.BadRequest("%s: backend %q is not an IP address", c.Action, c.Backend)
	}
	addr = addr.Unmap()
	var res control.BackendChangeResult
	var cerr error
	err = o.d.do(ctx, func() {
		d := o.d
		before, _ := d.state.Marshal()
		changed := true
		switch c.Action {
		case control.ActionMark:
			role, _ := config.ParseRole(c.Role)
			cerr = d.state.Mark(d.cfg, c.Rule, addr, role)
			res.Message = fmt.Sprintf("%s of rule %s marked %s", addr, c.Rule, role)
		case control.ActionDrain:
			cerr = d.state.Drain(d.cfg, c.Rule, addr, time.Now())
			res.Message = fmt.Sprintf("%s of rule %s drained: no new connections; tracked ones are honoured for %s", addr, c.Rule, drainingOf(d.cfg, c.Rule))
		case control.ActionUndrain:
			changed = d.state.Undrain(c.Rule, addr)
			res.Message = fmt.Sprintf("%s of rule %s back in service", addr, c.Rule)
			if !changed {
				res.Message = fmt.Sprintf("%s of rule %s was not drained", addr, c.Rule)
			}
		case control.ActionWeight:
			cerr = d.state.SetWeight(d.cfg, c.Rule, addr, *c.Weight)
			res.Message = fmt.Sprintf("%s of rule %s weight %d (overrides the health check's and the static weight)", addr, c.Rule, *c.Weight)
		case control.ActionReset:
			changed = d.state.Reset(c.Rule, addr)
			res.Message = fmt.Sprintf("%s of rule %s: overrides removed; the rule files decide again", addr, c.Rule)
			if !changed {
				res.Message = fmt.Sprintf("%s of rule %s had no override", addr, c.Rule)
			}
		}
		if cerr != nil {
			cerr = control.BadRequest("%v", cerr)
			return
		}
		after, _ := d.state.Marshal()
		if string(before) == string(after) {
			changed = false
		}
		if !changed {
			return
		}
		res.Changed = true
		if err := d.state.Save(d.cfg.StateFile); err != nil {
			if st, lerr := config.LoadState(d.cfg.StateFile); lerr == nil {
				d.state = st
			}
			cerr = fmt.Errorf("%s not applied: %w", c.Action, err)
			return
		}
		d.view = config.Apply(d.cfg, d.state)
		if err := d.publish(); err != nil {
			cerr = fmt.Errorf("%s saved but not published: %w", c.Action, err)
			return
		}
		d.log.Info("backend changed by the CLI", "action", c.Action, "rule", c.Rule, "backend", addr.String())
	})
	if err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	bs, err := o.Backends(ctx, c.Rule)
	if err == nil {
		for _, b := range bs {
			if b.Address == addr.String() {
				res.Backend = b
			}
		}
	}
	return &res, nil
}

func drainingOf(cfg *config.Config, rule string) time.Duration {
	if r := cfg.Rule(rule); r != nil {
		return r.ConnectionDrainingTimeout
	}
	return 0
}

// Reload implements control.API.
func (o *ops) Reload(ctx context.Context) (*control.ReloadResult, error) {
	var rerr error
	var res control.ReloadResult
	err := o.d.do(ctx, func() {
		rerr = o.d.Reload()
		res.Config, res.Rules = o.d.cfg.Path, len(o.d.cfg.Rules)
	})
	if err != nil {
		return nil, err
	}
	if rerr != nil {
		e := &control.Error{Status: http.StatusUnprocessableEntity, Message: "reload rejected; the running configuration keeps serving"}
		var cerr *config.Error
		if errors.As(rerr, &cerr) {
			for _, i := range cerr.Issues {
				e.Issues = append(e.Issues, i.String())
			}
		} else {
			e.Message += ": " + rerr.Error()
		}
		return nil, e
	}
	return &res, nil
}

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

// slotNames maps slots back to names for listings, from the registry.
func (o *ops) slotNames(ctx context.Context) (rules map[uint16]string, backends map[[2]uint32]string, err error) {
	rules, backends = map[uint16]string{}, map[[2]uint32]string{}
	err = o.d.do(ctx, func() {
		for name, s := range o.d.reg.rules {
			rules[s] = name
			for addr, b := range o.d.reg.backends[name] {
				backends[[2]uint32{uint32(s), b}] = addr.String()
			}
		}
	})
	return rules, backends, err
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
		o.d.log.Info("conntrack flushed by the CLI", "rule", q.Rule, "backend", q.Backend, "entries", res.Count)
	case control.ConntrackList:
		limit := q.Limit
		if limit == 0 {
			limit = defaultListLimit
		}
		rules, backends, err := o.slotNames(ctx)
		if err != nil {
			return nil, err
		}
		snap := e.Snapshot()
		add := func(queue int, recs []conntrack.Record) {
			for _, r := range recs {
				if len(res.Entries) >= limit {
					return
				}
				be := backends[[2]uint32{uint32(r.Rule), r.Value.Backend}]
				if be == "" {
					be = "slot " + strconv.Itoa(int(r.Value.Backend))
				}
				res.Entries = append(res.Entries, control.ConntrackRow{
					Queue: queue, Rule: rules[r.Rule], Key: FormatKey(&r.Key), Backend: be,
					Unconfirmed: r.Unconfirmed, ExpiresIn: r.ExpiresIn.Duration().Round(time.Second).String(),
					Stale: snap == nil || !snap.EntryValid(r.Rule, r.Value, r.Key.Proto, now),
				})
			}
		}
		for _, qs := range e.Stats() {
			recs, matched, err := qs.Conntrack.List(ctx, f, min(limit, qs.Conntrack.Cap()))
			if err != nil {
				return nil, fmt.Errorf("queue %d: %w", qs.Queue, err)
			}
			res.Count += matched
			add(qs.Queue, recs)
		}
		shared := sessions.List(f, now, sessions.Cap())
		res.Count += len(shared)
		add(-1, shared)
	}
	return res, nil
}

// FormatKey writes a flow key as "TCP 198.51.100.7:40000 → 203.0.113.10:80"
// (5-tuple), "TCP 198.51.100.7 → 203.0.113.10" (3-tuple) or
// "198.51.100.7 → 203.0.113.10" (2-tuple).
func FormatKey(k *hash.Key) string {
	src := netip.AddrFrom16(k.Src).Unmap()
	dst := netip.AddrFrom16(k.Dst).Unmap()
	switch k.Kind {
	case hash.Tuple5:
		return fmt.Sprintf("%s %s → %s", protoName(k.Proto), netip.AddrPortFrom(src, k.SrcPort), netip.AddrPortFrom(dst, k.DstPort))
	case hash.Tuple3:
		return fmt.Sprintf("%s %s → %s", protoName(k.Proto), src, dst)
	case hash.Tuple2:
		return fmt.Sprintf("%s → %s", src, dst)
	}
	return "(none)"
}

var protoNames = map[uint8]string{
	packet.ProtoTCP: "TCP", packet.ProtoUDP: "UDP", packet.ProtoICMP: "ICMP", packet.ProtoICMPv6: "ICMPv6",
	packet.ProtoESP: "ESP", packet.ProtoGRE: "GRE",
}

func protoName(p uint8) string {
	if n, ok := protoNames[p]; ok {
		return n
	}
	return "proto-" + strconv.Itoa(int(p))
}

// ParseProto parses a protocol name (TCP, UDP, ESP, GRE, ICMP, ICMPv6) or
// number.
func ParseProto(s string) (uint8, error) {
	for n, name := range protoNames {
		if strings.EqualFold(s, name) {
			return n, nil
		}
	}
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		return 0, fmt.Errorf("protocol %q: want TCP, UDP, ESP, GRE or a number", s)
	}
	return uint8(n), nil
}

// Lookup implements control.API.
func (o *ops) Lookup(ctx context.Context, q control.LookupQuery) (*control.LookupResult, error) {
	e := o.d.engine
	if e == nil {
		return nil, errors.New("lookup: the data plane is not running")
	}
	snap := e.Snapshot()
	var rs *RuleStatus
	st := o.d.Status()
	for i := range st.Rules {
		if st.Rules[i].Name == q.Rule {
			rs = &st.Rules[i]
		}
	}
	if rs == nil || snap == nil || int(rs.Slot) >= len(snap.Rules) {
		return nil, control.BadRequest("lookup: no rule %q", q.Rule)
	}
	m, err := lookupMeta(rs.Rule, q)
	if err != nil {
		return nil, control.BadRequest("lookup: %v", err)
	}
	checked := true
	var ferr error
	find := func(k *hash.Key, rule uint16, shared bool) (conntrack.Value, bool) {
		now := conntrack.Now(o.d.clock)
		if shared {
			sessions, _ := e.Shared()
			return sessions.Get(k, rule, now, 0) // 0: no refresh, a read only
		}
		// The queue a flow lands on is not known here: ask every queue's
		// worker for the one key (a single probe each, not a walk).
		for _, qs := range e.Stats() {
			rec, ok, err := qs.Conntrack.Get(ctx, *k, rule)
			if err != nil {
				ferr = err
				checked = false
				continue
			}
			if ok {
				return rec.Value, true
			}
		}
		return conntrack.Value{}, false
	}
	x := snap.Explain(m, conntrack.Now(o.d.clock), find)
	if ferr != nil && ctx.Err() != nil {
		return nil, ferr
	}
	res := Explain(snap, rs, m, &x)
	res.EntryChecked = checked || x.EntryFound
	return res, nil
}

// lookupMeta builds the packet a lookup asks about.
func lookupMeta(r *config.Rule, q control.LookupQuery) (*packet.Meta, error) {
	m := &packet.Meta{}
	proto := uint8(packet.ProtoTCP)
	if r.Protocol == config.ProtocolUDP {
		proto = packet.ProtoUDP
	}
	if q.Proto != "" {
		p, err := ParseProto(q.Proto)
		if err != nil {
			return nil, err
		}
		proto = p
	}
	if proto == packet.ProtoICMP || proto == packet.ProtoICMPv6 {
		return nil, errors.New("ICMP is hashed per packet and ICMP errors follow the flow they quote: look up that flow instead")
	}
	hasPorts := proto == packet.ProtoTCP || proto == packet.ProtoUDP
	var src netip.Addr
	var sport uint16
	if ap, err := netip.ParseAddrPort(q.Src); err == nil {
		src, sport = ap.Addr(), ap.Port()
	} else if a, err2 := netip.ParseAddr(q.Src); err2 == nil {
		if hasPorts {
			return nil, fmt.Errorf("src %q: a %s flow needs ADDR:PORT", q.Src, protoName(proto))
		}
		src = a
	} else {
		return nil, fmt.Errorf("src %q: want ADDR:PORT (e.g. 198.51.100.7:40000 or [2001:db8::7]:40000)", q.Src)
	}
	dst := r.VIP
	if q.Dst != "" {
		a, err := netip.ParseAddr(q.Dst)
		if err != nil {
			return nil, fmt.Errorf("dst %q is not an IP address", q.Dst)
		}
		dst = a
	}
	src, dst = src.Unmap(), dst.Unmap()
	if src.Is4() != dst.Is4() {
		return nil, fmt.Errorf("src %s and dst %s are of different IP versions", src, dst)
	}
	dport := uint16(q.DstPort)
	if hasPorts && q.DstPort == 0 {
		if r.Ports.All || len(r.Ports.Ranges) == 0 {
			return nil, fmt.Errorf("rule %s serves every port: give dst_port", r.Name)
		}
		dport = r.Ports.Ranges[0].First
	}
	m.Family = packet.IPv6
	if src.Is4() {
		m.Family = packet.IPv4
	}
	m.Src, m.Dst, m.Proto = src.As16(), dst.As16(), proto
	if hasPorts {
		m.SrcPort, m.DstPort = sport, dport
	}
	if proto == packet.ProtoTCP {
		m.TCPFlags = packet.TCPFlagACK
		if q.SYN {
			m.TCPFlags = packet.TCPFlagSYN
		}
	}
	return m, nil
}

// Explain turns the data plane's explanation into the lookup answer. rs
// is the rule's published status (for its tier).
func Explain(snap *dataplane.Snapshot, rs *RuleStatus, m *packet.Meta, x *dataplane.Explanation) *control.LookupResult {
	flow := hash.Key{Src: m.Src, Dst: m.Dst, SrcPort: m.SrcPort, DstPort: m.DstPort, Proto: m.Proto, Kind: hash.Tuple5}
	if m.Proto != packet.ProtoTCP && m.Proto != packet.ProtoUDP {
		flow.Kind = hash.Tuple3
	}
	res := &control.LookupResult{Rule: rs.Name, Flow: FormatKey(&flow), Tier: rs.Tier, Eligible: rs.Eligible, Verdict: "DROP"}
	if m.Proto == packet.ProtoTCP {
		res.Flow += map[bool]string{true: " (SYN)", false: " (established)"}[m.TCPFlags&packet.TCPFlagSYN != 0]
	}
	if !x.Matched || x.Rule != rs.Slot {
		res.Why = "the flow matches no forwarding rule"
		if x.Matched {
			res.Why = fmt.Sprintf("the flow matches rule %s, not %s", snap.Rules[x.Rule].Name, rs.Name)
		}
		return res
	}
	r := &snap.Rules[x.Rule]
	name := func(id uint32) string {
		if int(id) < len(r.Backends) && r.Backends[id].Present {
			return r.Backends[id].Name
		}
		return fmt.Sprintf("slot %d", id)
	}
	res.SelectionKey = FormatKey(&x.Selection)
	res.SelectionHash = fmt.Sprintf("%#016x", x.Hash)
	res.MaglevSlot = x.Slot
	if x.MaglevOK {
		res.MaglevBackend = name(x.MaglevBackend)
	}
	res.Trackable, res.SharedTable, res.NewConnection = x.Trackable, x.Shared, x.NewConnection
	if x.Trackable {
		res.TrackingKey = FormatKey(&x.Tracking)
	}
	res.EntryFound, res.EntryValid = x.EntryFound, x.EntryValid
	if x.EntryFound {
		res.EntryBackend = name(x.Entry.Backend)
	}
	maglev := fmt.Sprintf("Maglev slot %d of %d → %s", x.Slot, r.Table.Size(), res.MaglevBackend)
	d := x.Decision
	switch {
	case d.Verdict != dataplane.Tx:
		res.Why = fmt.Sprintf("eligible set empty (tier %s): new connections are dropped (%s)", rs.Tier, d.Reason)
		if x.EntryFound {
			res.Why = fmt.Sprintf("tracked entry to %s no longer valid, and the eligible set is empty (tier %s): dropped", res.EntryBackend, rs.Tier)
		}
		return res
	case d.Tracked:
		res.Why = fmt.Sprintf("tracked entry valid: the flow stays on %s", res.EntryBackend)
		if x.MaglevOK && x.MaglevBackend != d.Backend {
			res.Why += fmt.Sprintf(" (a new flow would get %s)", maglev)
		}
	case !x.Trackable:
		res.Why = fmt.Sprintf("not tracked (%s under %s affinity): hashed per packet, %s", protoName(m.Proto), affinityName(r.Affinity), maglev)
	case x.NewConnection:
		res.Why = "new connection (a SYN re-selects): " + maglev
		if x.EntryFound {
			res.Why += fmt.Sprintf("; the old entry to %s is replaced", res.EntryBackend)
		}
	case x.EntryFound:
		res.Why = fmt.Sprintf("tracked entry to %s no longer valid (drained, removed, unhealthy or flushed): re-selected, %s", res.EntryBackend, maglev)
	default:
		res.Why = "no tracked entry: new flow, " + maglev
	}
	res.Verdict, res.Backend = "TX", name(d.Backend)
	if int(d.Backend) < len(r.Backends) && r.Backends[d.Backend].Template == nil {
		res.Verdict = "DROP"
		res.Why += "; but its next hop is unresolved, so the worker drops it (no-next-hop)"
	}
	return res
}

func affinityName(a hash.Affinity) string {
	return [...]string{"NONE", "CLIENT_IP_PORT_PROTO", "CLIENT_IP_PROTO", "CLIENT_IP"}[min(int(a), 3)]
}
