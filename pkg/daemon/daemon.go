package daemon

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/health"
	"github.com/xlbnet/xlb/pkg/neigh"
	"github.com/xlbnet/xlb/ring"
	"github.com/xlbnet/xlb/ring/xsk"
)

// Options configure a daemon.
type Options struct {
	ConfigPath string
	Log        *slog.Logger
	// Ready is called once, when the data plane serves the first
	// configuration.
	Ready func(d *Daemon)
	// Signals makes Run handle SIGHUP (reload) and SIGTERM/SIGINT (stop);
	// tests leave it off and cancel the context instead.
	Signals bool
}

// Daemon is a running appliance: the data plane (Engine) and the control
// plane that feeds it. All control-plane state is owned by the goroutine
// running Run; other goroutines talk to it through requests.
type Daemon struct {
	opts     Options
	log      *slog.Logger
	clock    *clock
	engine   *Engine
	resolver *neigh.Resolver
	reg      *registry
	checker  *health.Checker

	// Health changes arrive from prober goroutines: OnChange parks them in
	// pendingProbes and pokes healthPoke; the control loop applies them in
	// one batch, so a burst of changes costs one recomputation.
	pendingMu     sync.Mutex
	pendingProbes map[probeKey]probe
	healthPoke    chan struct{}

	// Owned by the Run goroutine.
	cfg      *config.Config
	state    *config.State
	view     *config.View
	rules    map[string]*ruleRuntime
	probes   map[probeKey]probe
	nexthops map[nhKey]nexthop
	requests chan func()

	mu     sync.Mutex // guards status
	status Status

	reloadsOK, reloadsRejected atomic.Uint64
}

// Status is what the daemon publishes about itself after each change.
type Status struct {
	Config   string
	Loaded   time.Time
	XDPMode  string
	ZeroCopy bool
	Queues   []int
	Rules    []RuleStatus
}

// RuleStatus is one rule's state for `xlb status`.
type RuleStatus struct {
	Name     string
	VIP      netip.Addr
	Tier     string
	Reason   string
	State    *failover.State
	Rule     *config.Rule
	Slot     uint16
	Eligible int // members of the default eligible set
}

// Run loads the configuration, starts the data plane and serves until ctx
// ends (or SIGTERM with Options.Signals). A configuration error is
// returned before anything is attached.
func Run(ctx context.Context, opts Options) error {
	d, err := New(opts)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// New loads and validates the configuration; it changes nothing on the
// system.
func New(opts Options) (*Daemon, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	cfg, warnings, err := config.Load(opts.ConfigPath)
	for _, w := range warnings {
		opts.Log.Warn("configuration", "warning", w.String())
	}
	if err != nil {
		return nil, err
	}
	st, err := config.LoadState(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	d := &Daemon{
		opts: opts, log: opts.Log, clock: newClock(), reg: newRegistry(),
		cfg: cfg, state: st, rules: map[string]*ruleRuntime{},
		probes: map[probeKey]probe{}, nexthops: map[nhKey]nexthop{},
		requests:      make(chan func()),
		pendingProbes: map[probeKey]probe{}, healthPoke: make(chan struct{}, 1),
	}
	d.view = config.Apply(cfg, st)
	for _, s := range d.view.Stale {
		d.log.Warn("state overlay", "issue", s.String())
	}
	return d, nil
}

func queueList(q config.Queues) []int {
	if q.All {
		return nil
	}
	if len(q.List) > 0 {
		return slices.Clone(q.List)
	}
	out := make([]int, q.Count)
	for i := range out {
		out[i] = i
	}
	return out
}

func attachMode(m config.XDPMode) xsk.AttachMode {
	switch m {
	case config.XDPNative:
		return xsk.AttachNative
	case config.XDPGeneric:
		return xsk.AttachGeneric
	}
	return xsk.AttachAuto
}

func bindMode(m config.BindMode) ring.BindMode {
	switch m {
	case config.BindZeroCopy:
		return ring.BindZeroCopy
	case config.BindCopy:
		return ring.BindCopy
	}
	return ring.BindAuto
}

func randomSeed() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return uint64(time.Now().UnixNano())
	}
	return binary.LittleEndian.Uint64(b[:])
}

// Run starts the data plane and runs the control loop.
func (d *Daemon) Run(ctx context.Context) error {
	var err error
	d.engine, err = StartEngine(EngineConfig{
		Interface:  d.cfg.Interface,
		Queues:     queueList(d.cfg.Queues),
		XDPMode:    attachMode(d.cfg.XDPMode),
		Bind:       bindMode(d.cfg.BindMode),
		MaxEntries: d.cfg.Conntrack.MaxEntries,
		Seed:       randomSeed(),
		Clock:      d.clock,
		Log:        d.log,
	})
	if err != nil {
		return fmt.Errorf("start data plane: %w", err)
	}
	defer func() {
		if err := d.engine.Close(); err != nil {
			d.log.Error("stop data plane", "err", err)
		}
		d.log.Info("stopped: xdp program detached, sockets closed")
	}()
	d.resolver = neigh.New(nil)
	d.checker = health.New(health.Options{OnChange: d.onHealth})
	defer d.checker.Stop()
	if err := d.checker.Set(d.healthTargets()); err != nil {
		return fmt.Errorf("start health checks: %w", err)
	}
	d.resolveAll(ctx)
	if err := d.publish(); err != nil {
		return err
	}
	defer d.startControl(ctx)()
	defer d.startMetrics()()
	d.log.Info("serving", "rules", len(d.cfg.Rules), "queues", d.engine.Queues(), "xdp_mode", d.engine.Mode().String(), "zerocopy", d.engine.ZeroCopy())
	if d.opts.Ready != nil {
		d.opts.Ready(d)
	}

	var sigs chan os.Signal
	if d.opts.Signals {
		sigs = make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
		defer signal.Stop(sigs)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastResolve := time.Now()
	var lastHealthPublish time.Time
	var healthDue <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-sigs:
			if s == syscall.SIGHUP {
				if err := d.Reload(); err != nil {
					d.log.Error("reload rejected; the running configuration keeps serving", "err", err)
				}
				continue
			}
			d.log.Info("stopping", "signal", s.String())
			return nil
		case f := <-d.requests:
			f()
		case <-d.healthPoke:
			if !d.applyProbes() {
				continue
			}
			// A weight header that oscillates must not rebuild the Maglev
			// tables on every probe: publish at most every
			// minHealthPublish, the latest verdicts included.
			if wait := minHealthPublish - time.Since(lastHealthPublish); wait > 0 {
				if healthDue == nil {
					healthDue = time.After(wait)
				}
				continue
			}
			lastHealthPublish = time.Now()
			if err := d.publish(); err != nil {
				d.log.Error("recompute after health change", "err", err)
			}
		case <-healthDue:
			healthDue = nil
			lastHealthPublish = time.Now()
			if err := d.publish(); err != nil {
				d.log.Error("recompute after health change", "err", err)
			}
		case now := <-tick.C:
			changed := false
			if now.Sub(lastResolve) >= 5*time.Second {
				changed = d.resolveAll(ctx)
				lastResolve = now
			}
			if changed || d.timerDue(now) {
				if err := d.publish(); err != nil {
					d.log.Error("recompute", "err", err)
				}
			}
		}
	}
}

// onHealth receives a prober's change (on a prober goroutine).
func (d *Daemon) onHealth(s health.Status) {
	p := probe{health: s.Health, weight: s.Weight, weightState: s.WeightState, since: s.Since}
	if s.LastError != nil {
		p.lastError = s.LastError.Error()
	}
	d.pendingMu.Lock()
	d.pendingProbes[probeKey{s.Rule, s.Backend}] = p
	d.pendingMu.Unlock()
	select {
	case d.healthPoke <- struct{}{}:
	default:
	}
}

// applyProbes moves the parked health changes into d.probes and reports
// whether any verdict or weight changed.
func (d *Daemon) applyProbes() bool {
	d.pendingMu.Lock()
	pending := d.pendingProbes
	d.pendingProbes = map[probeKey]probe{}
	d.pendingMu.Unlock()
	changed := false
	for k, p := range pending {
		old, had := d.probes[k]
		if !had || old.health != p.health || old.weight != p.weight || old.weightState != p.weightState {
			changed = true
			if !had || old.health != p.health {
				d.log.Info("health", "rule", k.rule, "backend", k.addr, "health", p.health.String(), "weight", p.weight, "weight_state", p.weightState.String(), "error", p.lastError)
			}
		}
		d.probes[k] = p
	}
	return changed
}

// healthTargets lists a prober for every backend of every rule that
// checks health.
func (d *Daemon) healthTargets() []health.Target {
	var ts []health.Target
	for i := range d.cfg.Rules {
		r := &d.cfg.Rules[i]
		if r.HealthCheck.Type == config.HealthNone {
			continue
		}
		for _, gb := range r.Backends() {
			ts = append(ts, health.Target{Key: health.Key{Rule: r.Name, Backend: gb.Addr}, Check: r.HealthCheck})
		}
	}
	return ts
}

// minHealthPublish is the shortest time between two recomputations caused
// by health or weight changes.
const minHealthPublish = 250 * time.Millisecond

// do runs f on the control goroutine and waits for it.
func (d *Daemon) do(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case d.requests <- func() { f(); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	}
	<-done
	return nil
}

// timerDue reports whether a rule's eligible set may change with time
// alone (failback delay, undrain hold, drain deadlines).
func (d *Daemon) timerDue(now time.Time) bool {
	for _, rt := range d.rules {
		if rt.prev != nil && !rt.prev.NextCompute.IsZero() && !now.Before(rt.prev.NextCompute) {
			return true
		}
	}
	return false
}

// resolveAll resolves the next hop of every backend and reports whether
// anything changed.
func (d *Daemon) resolveAll(ctx context.Context) bool {
	want := map[nhKey]bool{}
	for _, r := range d.cfg.Rules {
		for _, gb := range r.Backends() {
			want[nhKey{gb.Addr, r.Encap.Type == config.EncapDirect}] = true
		}
	}
	changed := false
	var wg sync.WaitGroup
	var mu sync.Mutex
	for k := range want {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			nh, err := d.resolver.Resolve(rctx, k.addr)
			if err == nil && k.direct && !nh.OnLink() {
				err = fmt.Errorf("DIRECT backend %s is not on the link (route via %s)", k.addr, nh.Gateway)
			}
			if err == nil && !nh.Src.IsValid() {
				nh.Src, err = interfaceAddr(nh.Ifindex, k.addr.Is4())
			}
			mu.Lock()
			defer mu.Unlock()
			old, had := d.nexthops[k]
			if !had || (old.err == nil) != (err == nil) || (err == nil && !sameNextHop(old.nh, nh)) {
				changed = true
				if err != nil {
					d.log.Warn("backend next hop unresolved: not eligible", "backend", k.addr, "err", err)
				} else {
					d.log.Info("backend next hop", "backend", k.addr, "gateway", nh.Gateway, "mac", nh.DstMAC.String(), "mtu", nh.MTU)
				}
			}
			d.nexthops[k] = nexthop{nh: nh, err: err}
		}()
	}
	wg.Wait()
	for k := range d.nexthops {
		if !want[k] {
			delete(d.nexthops, k)
		}
	}
	return changed
}

func sameNextHop(a, b neigh.NextHop) bool {
	return a.Gateway == b.Gateway && a.Ifindex == b.Ifindex && a.Src == b.Src && a.MTU == b.MTU &&
		string(a.DstMAC) == string(b.DstMAC) && string(a.SrcMAC) == string(b.SrcMAC)
}

// interfaceAddr returns a global address of the family on the interface,
// for the outer source when the route names none.
func interfaceAddr(ifindex int, v4 bool) (netip.Addr, error) {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return netip.Addr{}, err
	}
	fam := netlink.FAMILY_V6
	if v4 {
		fam = netlink.FAMILY_V4
	}
	addrs, err := netlink.AddrList(l, fam)
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if ok && ip.IsGlobalUnicast() {
			return ip.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("interface %d has no global %s address for the outer header", ifindex, map[bool]string{true: "IPv4", false: "IPv6"}[v4])
}

// publish recomputes every rule and publishes a new snapshot.
func (d *Daemon) publish() error {
	now := time.Now()
	rules := make([]dataplane.Rule, 0, len(d.cfg.Rules))
	var vips []xsk.VIP
	var statuses []RuleStatus
	keep := map[string]bool{}
	for i := range d.view.Rules {
		rv := &d.view.Rules[i]
		r := rv.Rule
		keep[r.Name] = true
		slot, err := d.reg.rule(r.Name)
		if err != nil {
			return err
		}
		rt := d.rules[r.Name]
		if rt == nil {
			rt = &ruleRuntime{slot: slot, removed: map[netip.Addr]removedBackend{}}
			d.rules[r.Name] = rt
		}
		groups, backends := d.failoverInput(rv, rt)
		st, err := failover.Compute(policyOf(r), groups, backends, rt.prev, now)
		if err != nil {
			return fmt.Errorf("rule %s: %w", r.Name, err)
		}
		for _, ev := range st.Events {
			d.log.Info("eligible set", "rule", r.Name, "event", ev.Kind.String(), "from", ev.From.String(), "to", ev.To.String(), "group", ev.Group, "reason", ev.Reason)
		}
		// Forget removed backends once their entries are over.
		for addr := range rt.removed {
			if b, ok := st.Backend(addr.String()); ok && !b.DrainUntil.IsZero() && now.After(b.DrainUntil.Add(r.ConnectionTracking.IdleTimeout)) {
				delete(rt.removed, addr)
			}
		}
		rt.prev = st
		dr, err := dataplane.BuildRule(dataplane.RuleConfig{
			Name: r.Name, Match: matchOf(r),
			Affinity: r.SessionAffinity.Hash(), Mode: r.ConnectionTracking.TrackingMode.Hash(),
			Persistence:      failover.PersistencePolicy(r.ConnectionTracking.PersistenceOnUnhealthy),
			Idle:             r.ConnectionTracking.IdleTimeout,
			FragmentTracking: r.FragmentTracking,
			TableSize:        uint32(d.cfg.MaglevTableSize),
			ZoneClients:      policyOf(r).Zonal.Clients,
		}, st, d.cfg.HashSeed, d.clock)
		if err != nil {
			return err
		}
		for i := range dr.Backends {
			b := &dr.Backends[i]
			if !b.Present {
				continue
			}
			if t, err := d.template(r, netip.MustParseAddr(b.Name)); err == nil {
				b.Template = t
			}
		}
		for int(slot) >= len(rules) {
			rules = append(rules, dataplane.Rule{})
		}
		rules[slot] = dr
		vips = append(vips, vipsOf(r)...)
		statuses = append(statuses, RuleStatus{Name: r.Name, VIP: r.VIP, Tier: st.Tier.String(), Reason: st.Reason, State: st, Rule: r, Slot: slot, Eligible: len(st.Eligible)})
	}
	for name := range d.rules {
		if !keep[name] {
			delete(d.rules, name)
		}
	}
	for len(rules) < d.reg.ruleCount() {
		rules = append(rules, dataplane.Rule{})
	}
	snap, err := dataplane.NewSnapshot(d.cfg.HashSeed, rules)
	if err != nil {
		return err
	}
	if err := d.engine.Publish(snap, vips); err != nil {
		return err
	}
	d.mu.Lock()
	d.status = Status{Config: d.cfg.Path, Loaded: now, XDPMode: d.engine.Mode().String(), ZeroCopy: d.engine.ZeroCopy(), Queues: d.engine.Queues(), Rules: statuses}
	d.mu.Unlock()
	return nil
}

// Status returns the latest published status; safe from any goroutine.
func (d *Daemon) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status
}

// Engine returns the data plane.
func (d *Daemon) Engine() *Engine { return d.engine }

// Reload re-reads the configuration and the state file. A configuration
// with any error is rejected whole and the running one keeps serving.
// Backends that left a rule are drained per connection_draining_timeout;
// tracked connections of the others keep their backend. It must run on the
// control goroutine (Run does so for SIGHUP).
func (d *Daemon) Reload() error {
	err := d.reload()
	if err != nil {
		d.reloadsRejected.Add(1)
	} else {
		d.reloadsOK.Add(1)
	}
	return err
}

func (d *Daemon) reload() error {
	cfg, warnings, err := config.Load(d.opts.ConfigPath)
	for _, w := range warnings {
		d.log.Warn("configuration", "warning", w.String())
	}
	if err != nil {
		var cerr *config.Error
		if errors.As(err, &cerr) {
			for _, i := range cerr.Issues {
				d.log.Error("configuration", "error", i.String())
			}
		}
		return err
	}
	if cfg.Interface != d.cfg.Interface || !slices.Equal(queueList(cfg.Queues), queueList(d.cfg.Queues)) || cfg.Queues.All != d.cfg.Queues.All {
		return fmt.Errorf("reload: interface and queues cannot change while running (restart xlb)")
	}
	st, err := config.LoadState(cfg.StateFile)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, r := range d.cfg.Rules {
		nr := cfg.Rule(r.Name)
		rt := d.rules[r.Name]
		if nr == nil || rt == nil {
			continue
		}
		for _, gb := range r.Backends() {
			if !ruleHas(nr, gb.Addr) {
				rt.removed[gb.Addr] = removedBackend{at: now, group: gb.Group.Name}
			}
		}
	}
	old, oldState := d.cfg, d.state
	d.cfg, d.state = cfg, st
	d.view = config.Apply(cfg, st)
	d.resolveAll(context.Background())
	if err := d.publish(); err != nil {
		d.cfg, d.state = old, oldState
		d.view = config.Apply(old, oldState)
		return fmt.Errorf("reload: %w", err)
	}
	if err := d.checker.Set(d.healthTargets()); err != nil {
		d.log.Error("reload health checks", "err", err)
	}
	for k := range d.probes {
		if r := cfg.Rule(k.rule); r == nil || !ruleHas(r, k.addr) {
			delete(d.probes, k)
		}
	}
	d.log.Info("reloaded", "config", cfg.Path, "rules", len(cfg.Rules))
	return nil
}

func ruleHas(r *config.Rule, addr netip.Addr) bool {
	for _, gb := range r.Backends() {
		if gb.Addr == addr {
			return true
		}
	}
	return false
}
