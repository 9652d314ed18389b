package daemon

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/engine"
)

// publishedStatus is what the daemon publishes about itself after each change.
type publishedStatus struct {
	Config   string
	Loaded   time.Time
	XDPMode  string
	ZeroCopy bool
	Queues   []int
	Rules    []*ruleStatus // shared between publications while a rule does not change; read-only
	// Unmatched is unmatched_vip_traffic as published (lookup).
	Unmatched config.UnmatchedVIPTraffic
}

// ruleStatus is one rule's state for `xlb status`.
type ruleStatus struct {
	Name     string
	VIP      netip.Addr
	Tier     string
	Reason   string
	State    *failover.State
	Rule     *config.Rule
	Slot     uint16
	Eligible int // members of the default eligible set
	// Warm: the first round of health checks is in the published snapshot
	// (warmup.go); Pending lists the backends without a verdict yet.
	Warm    bool
	Pending []netip.Addr
	// Built is the rule as the workers read it, digest its table_digest
	// (digest.go), both as published.
	Built  *dataplane.Rule
	digest *lazyDigest
	// Counts is the rule's line of the status summary.
	Counts ruleCounts
}

// ruleCounts counts a rule's backends for the status summary, once per
// computation of the rule, so a summary costs a pass over the rules.
type ruleCounts struct {
	backends, drained, eligible int
	health                      [3]int // by failover.Health
}

func countBackends(st *failover.State) ruleCounts {
	var c ruleCounts
	for i := range st.Backends {
		b := &st.Backends[i]
		c.backends++
		if b.Admin == failover.AdminDrained || b.Removed {
			c.drained++
		}
		if !b.Removed && int(b.Health) < len(c.health) {
			c.health[b.Health]++ // a removed backend has no verdict
		}
		if b.Eligible {
			c.eligible++
		}
	}
	return c
}

// ruleRuntime is what the control plane remembers of one rule between
// computations.
type ruleRuntime struct {
	slot uint16
	prev *failover.State
	// carry is prev as the state document carries it (MarshalCarry),
	// encoded once per computation of the rule: carryOf is the State it
	// encodes (a State is never changed once computed).
	carry   []byte
	carryOf *failover.State
	removed map[netip.Addr]removedBackend // gone from the configuration, still draining
	cfg     *config.Rule                  // as last published
	warm    warmState                     // warmup.go
	// forgetAt is when the first backend of removed may be forgotten
	// (its tracked connections are over); zero: none.
	forgetAt time.Time

	// What the rule's last computation published, reused as it is by
	// every publication until something the rule depends on changes
	// (touch) or its time comes (due).
	status *ruleStatus
	vips   []engine.VIP
	seen   uint64 // the publication that last found the rule configured
}

type removedBackend struct {
	at    time.Time
	group string
}

// Changes cost what they change (docs/design.md#publication-that-costs-what-it-changes). A publication
// computes again only the rules something touched since the last one
// (touch: a reload that changed them, a CLI change, a health verdict, a
// next hop) and those whose time came (due: a failover timer, a cold
// rule's warm-up deadline, a removed backend to forget); every other rule
// is published as it was: the same *dataplane.Rule in the new snapshot
// (NextSnapshot shares it, its tables included), the same status and VIP
// set. The cost of a publication is then the rules it computes plus one
// pass over the rules to assemble the pointer table.
type publication struct {
	// touched names the rules to compute at the next publication: a name
	// is a rule's or a backend service's (then every rule of the service:
	// they share its overrides and its probes' verdicts).
	touched map[string]bool
	// verdicts names the rules (or services) whose health verdicts or
	// weights changed since the last health publication: computed by the
	// publications health changes cause (publish), left for them by those
	// a reload or a CLI change causes (publishConfig).
	verdicts map[string]bool
	all      bool   // every rule (a change of the hash seed, a restart)
	gen      uint64 // publications so far
	snap     *dataplane.Snapshot
	vips     []engine.VIP // the VIP set published with snap
	// unmatched is the unmatched_vip_traffic the VIP set was made for.
	unmatched config.UnmatchedVIPTraffic
	// tables builds every Maglev table: rules with the same backend set,
	// weights and size share one, and a rule computed again without a
	// change of its eligible set gets its table back without a build.
	tables hash.Tables
	// firstTiers gathers, during one publication, the rules computed for
	// the first time (a start, a reload that adds rules) by the tier they
	// start on: their first eligible set is logged as one line per tier
	// (logFirstTiers), not one per rule (a thousand lines at a start).
	firstTiers map[failover.Tier]firstTier
}

// firstTier is the rules that started on one tier in a publication.
type firstTier struct {
	count  int
	names  []string // the first firstTierNames, file order
	reason string   // the first rule's
}

// firstTierNames is how many rules a first-tier line names.
const firstTierNames = 5

// touch marks rules to be computed at the next publication: a rule's
// name marks every rule of its backend service, a service's name all its
// rules.
func (d *daemon) touch(rules ...string) {
	if d.pub.touched == nil {
		d.pub.touched = map[string]bool{}
	}
	for _, r := range rules {
		d.pub.touched[r] = true
	}
}

// touchVerdict marks rules whose health verdict or weight changed; a
// rule's name marks every rule of its backend service.
func (d *daemon) touchVerdict(rules ...string) {
	if d.pub.verdicts == nil {
		d.pub.verdicts = map[string]bool{}
	}
	for _, r := range rules {
		d.pub.verdicts[r] = true
	}
}

// touchAll marks every rule.
func (d *daemon) touchAll() { d.pub.all = true }

// touchBackends marks the rules that have one of the backends (a next hop
// changed); one pass over the view, only when some next hop changed.
func (d *daemon) touchBackends(addrs map[netip.Addr]bool) {
	if len(addrs) == 0 {
		return
	}
	for i := range d.view.Rules {
		rv := &d.view.Rules[i]
		for _, b := range rv.Backends {
			if addrs[b.Addr] {
				d.touch(rv.Rule.Name)
				break
			}
		}
		if rt := d.rules[rv.Rule.Name]; rt != nil {
			for addr := range rt.removed {
				if addrs[addr] {
					d.touch(rv.Rule.Name)
				}
			}
		}
	}
}

// due reports whether the rule must be computed again because time
// passed: a failover timer (failback delay, undrain hold, drain
// deadlines), a cold rule's warm-up deadline, or a removed backend whose
// connections are over.
func (rt *ruleRuntime) due(now time.Time) bool {
	switch {
	case rt.prev != nil && !rt.prev.NextCompute.IsZero() && !now.Before(rt.prev.NextCompute):
		return true
	case !rt.forgetAt.IsZero() && !now.Before(rt.forgetAt):
		return true
	case !rt.warm.warm && rt.cfg != nil && !rt.warm.since.IsZero() && now.Sub(rt.warm.since) >= warmDeadline(rt.cfg.HealthCheck):
		return true
	}
	return false
}

// computed is one rule computed by a publication, kept until the
// publication is out.
type computed struct {
	rt      *ruleRuntime
	status  *ruleStatus
	vips    []engine.VIP
	pending []netip.Addr
	at      int // the rule's place in the published status

	// What prepare gives the build, and the build's results.
	rv     *config.RuleView
	st     *failover.State
	warm   bool
	build  dataplane.RuleConfig
	built  *dataplane.Rule
	digest *lazyDigest
}

// lazyDigest is a rule's table_digest, computed when a reader first asks
// for it (a hash over every slot: a tenth of a start's CPU at 1000
// rules, for a figure only status shows). Safe for concurrent use.
type lazyDigest struct {
	once sync.Once
	seed uint64
	rule *dataplane.Rule
	v    string
}

// Digest returns the rule's table_digest.
func (s *ruleStatus) Digest() string {
	l := s.digest
	l.once.Do(func() {
		l.v = tableDigest(l.seed, l.rule)
		l.rule = nil
	})
	return l.v
}

// stillCold is a cold rule that a publication found still cold: only its
// pending backends changed.
type stillCold struct {
	rt      *ruleRuntime
	status  *ruleStatus
	pending []netip.Addr
}

// publish computes the touched and due rules and those whose verdicts
// changed, publishes a new snapshot that shares every other rule with the
// previous one, and then the status, the BGP announcements and the state
// document.
func (d *daemon) publish() error { return d.publishTouched(true) }

// publishConfig is publish for a change an operator waits for (a reload,
// a CLI change): the rules touched only by health verdicts are left for
// the health publication the pacer has scheduled for them (daemon.serve),
// so the change costs the rules it changed, not the verdicts that arrived
// since the last health publication (thousands in a first round of
// checks).
func (d *daemon) publishConfig() error { return d.publishTouched(false) }

// touchedServices are the backend services of the rules touched: a name
// in touched is a rule's or a service's (publication.touched).
func (d *daemon) touchedServices(touched map[string]bool) map[string]bool {
	services := map[string]bool{}
	if len(touched) == 0 || d.pub.all {
		return services
	}
	for i := range d.view.Rules {
		if r := d.view.Rules[i].Rule; touched[r.Name] || touched[r.ServiceName()] {
			services[r.ServiceName()] = true
		}
	}
	return services
}

// publishTouched is publish; withVerdicts: the rules whose verdicts
// changed are computed too.
//
// A cold rule (warmup.go) that a verdict touched and that is still cold
// is not computed again: its failover input holds no verdict until it is
// warm, so the computation would give what it gave; only its pending
// backends are counted again, and its status row is copied with them. In
// a first round of checks, where verdicts touch every rule every
// publication, a publication then costs a warm check a rule (a map
// lookup a backend) until the rules turn warm.
func (d *daemon) publishTouched(withVerdicts bool) error {
	defer d.logFirstTiers()
	now := time.Now()
	p := &d.pub
	p.gen++
	rules := make([]*dataplane.Rule, d.reg.ruleCount(), d.reg.ruleCount()+1)
	vipsChanged := p.snap == nil || p.unmatched != d.cfg.UnmatchedVIPTraffic
	statuses := make([]*ruleStatus, 0, len(d.view.Rules))
	// done never grows past its capacity: the builders hold pointers
	// into it while prepare appends.
	done := make([]computed, 0, len(d.view.Rules))
	var cold []stillCold
	builds := startBuilds(d.cfg.HashSeed, d.clock, p.snap != nil && p.snap.Seed == d.cfg.HashSeed)
	touchedServices := d.touchedServices(p.touched)
	var verdictServices map[string]bool
	if withVerdicts {
		verdictServices = d.touchedServices(p.verdicts)
	}
	for i := range d.view.Rules {
		rv := &d.view.Rules[i]
		name, service := rv.Rule.Name, rv.Rule.ServiceName()
		rt := d.rules[name]
		if rt != nil && rt.status != nil && !p.all && !p.touched[name] && !touchedServices[service] && !rt.due(now) {
			if !withVerdicts || (!p.verdicts[name] && !verdictServices[service]) {
				rt.seen = p.gen
				rules[rt.slot] = rt.status.Built
				statuses = append(statuses, rt.status)
				continue
			}
			if !rt.warm.warm {
				if warm, pending := d.warmCheck(rv, rt, now); !warm {
					rt.seen = p.gen
					rules[rt.slot] = rt.status.Built
					s := *rt.status
					s.Pending = pending
					statuses = append(statuses, &s)
					cold = append(cold, stillCold{rt, &s, pending})
					continue
				}
			}
		}
		c, err := d.prepare(rv, now)
		if err != nil {
			builds.wait()
			return err
		}
		statuses = append(statuses, nil) // the status is made once the rule is built
		c.at = len(statuses) - 1
		done = append(done, c)
		builds.add(&done[len(done)-1])
	}
	if err := builds.wait(); err != nil {
		return err
	}
	for i := range done {
		c := &done[i]
		d.finishRule(c)
		for int(c.rt.slot) >= len(rules) {
			rules = append(rules, nil)
		}
		rules[c.rt.slot] = c.status.Built
		statuses[c.at] = c.status
		vipsChanged = vipsChanged || c.rt.status == nil || !slices.Equal(c.vips, c.rt.vips)
	}
	if len(d.rules) != len(d.view.Rules) {
		for name, rt := range d.rules {
			if rt.seen != p.gen {
				delete(d.rules, name)
				d.ruleChanged(name)
				vipsChanged = true
			}
		}
	}
	vips := p.vips
	if vipsChanged { // a rule's VIP, protocol or ports changed, or a rule came or went
		fresh := make(map[string][]engine.VIP, len(done))
		for _, c := range done {
			fresh[c.status.Name] = c.vips
		}
		vips = nil
		for i := range d.view.Rules {
			name := d.view.Rules[i].Rule.Name
			if v, ok := fresh[name]; ok {
				vips = append(vips, v...)
			} else {
				vips = append(vips, d.rules[name].vips...)
			}
		}
		vips = append(vips, unmatchedVIPs(d.cfg.UnmatchedVIPTraffic, vips)...)
	}
	snap, err := dataplane.NextSnapshot(p.snap, d.cfg.HashSeed, rules)
	if err != nil {
		return err
	}
	if d.engine != nil && vipsChanged {
		if err := d.engine.Publish(snap, vips); err != nil {
			return err
		}
	} else if d.engine != nil {
		d.engine.PublishRules(snap)
	}
	d.publishProbeRoutes(snap, done) // probepath.go
	p.snap, p.vips, p.unmatched, p.all = snap, vips, d.cfg.UnmatchedVIPTraffic, false
	clear(p.touched)
	if withVerdicts {
		clear(p.verdicts)
	}
	for _, c := range done {
		c.rt.status, c.rt.vips, c.rt.cfg = c.status, c.vips, c.status.Rule
		d.latchWarm(c.status.Name, c.rt, c.status.Warm, c.pending, now)
	}
	for _, c := range cold {
		c.rt.status = c.status
		d.latchWarm(c.status.Name, c.rt, false, c.pending, now)
	}
	st := publishedStatus{Config: d.cfg.Path, Loaded: now, Rules: statuses, Unmatched: d.cfg.UnmatchedVIPTraffic}
	if d.engine != nil {
		st.XDPMode, st.ZeroCopy, st.Queues = d.engine.Mode().String(), d.engine.ZeroCopy(), d.engine.Queues()
	}
	d.mu.Lock()
	d.status = st
	d.mu.Unlock()
	d.announce()      // bgp.go: the VIPs follow the published state
	d.storeState(nil) // systemd.go: what a restart after a crash starts from
	return nil
}

// firstTier counts a rule's first eligible set (its switch from NONE).
func (p *publication) firstTier(rule string, ev failover.Event) {
	if p.firstTiers == nil {
		p.firstTiers = map[failover.Tier]firstTier{}
	}
	ft := p.firstTiers[ev.To]
	if ft.count == 0 {
		ft.reason = ev.Reason
	}
	ft.count++
	if len(ft.names) < firstTierNames {
		ft.names = append(ft.names, rule)
	}
	p.firstTiers[ev.To] = ft
}

// logFirstTiers logs the first eligible sets of a publication, one line
// per tier, and forgets them.
func (d *daemon) logFirstTiers() {
	tiers := slices.Sorted(maps.Keys(d.pub.firstTiers))
	for _, t := range tiers {
		ft := d.pub.firstTiers[t]
		names := strings.Join(ft.names, ",")
		if ft.count > len(ft.names) {
			names += fmt.Sprintf(",… (%d more)", ft.count-len(ft.names))
		}
		d.log.Info("eligible set", "rules", ft.count, "event", failover.EventTierSwitch.String(), "from", failover.TierNone.String(), "to", t.String(), "names", names, "reason", ft.reason)
	}
	clear(d.pub.firstTiers)
}

// prepare runs one rule's eligible-set engine: the first, serial part
// of computing a rule. It changes the rule's runtime (its failover
// state, removed backends) but publishes nothing.
func (d *daemon) prepare(rv *config.RuleView, now time.Time) (computed, error) {
	r := rv.Rule
	slot, err := d.reg.rule(r.Name)
	if err != nil {
		return computed{}, err
	}
	rt := d.rules[r.Name]
	if rt == nil {
		rt = &ruleRuntime{slot: slot, removed: map[netip.Addr]removedBackend{}}
		d.rules[r.Name] = rt
	}
	rt.seen = d.pub.gen
	d.ruleChanged(r.Name) // its state document's bucket (docparts.go)
	warm, pending := d.warmCheck(rv, rt, now)
	groups, backends := d.ruleInput(rv, rt, warm)
	st, err := failover.Compute(policyOf(r), groups, backends, rt.prev, now)
	if err != nil {
		return computed{}, fmt.Errorf("rule %s: %w", r.Name, err)
	}
	for _, ev := range st.Events {
		if ev.Kind == failover.EventTierSwitch && ev.From == failover.TierNone {
			d.pub.firstTier(r.Name, ev)
			continue
		}
		d.log.Info("eligible set", "rule", r.Name, "event", ev.Kind.String(), "from", ev.From.String(), "to", ev.To.String(), "group", ev.Group, "reason", ev.Reason)
	}
	// Forget removed backends once their entries are over.
	rt.forgetAt = time.Time{}
	for addr := range rt.removed {
		b, ok := st.Backend(addr.String())
		if !ok || b.DrainUntil.IsZero() {
			continue
		}
		if over := b.DrainUntil.Add(r.ConnectionTracking.IdleTimeout); now.After(over) {
			delete(rt.removed, addr)
		} else if rt.forgetAt.IsZero() || over.Before(rt.forgetAt) {
			rt.forgetAt = over
		}
	}
	rt.prev = st
	size, err := tableSize(d.cfg, r)
	if err != nil {
		return computed{}, err
	}
	return computed{rt: rt, rv: rv, st: st, warm: warm, pending: pending, vips: vipsOf(r), build: d.ruleConfig(r, size)}, nil
}

// ruleConfig is what dataplane.BuildRule is given for rule r besides its
// eligible set.
func (d *daemon) ruleConfig(r *config.Rule, size uint32) dataplane.RuleConfig {
	return dataplane.RuleConfig{
		Name: r.Name, Match: matchOf(r),
		Affinity: affinities.of(r.SessionAffinity), Mode: trackingModes.of(r.ConnectionTracking.TrackingMode),
		Persistence:      persistences.of(r.ConnectionTracking.PersistenceOnUnhealthy),
		Idle:             r.ConnectionTracking.IdleTimeout,
		FragmentTracking: r.FragmentTracking,
		TableSize:        size,
		ZoneClients:      policyOf(r).Zonal.Clients,
		SourceRanges:     r.SourceRanges,
		Tables:           &d.pub.tables,
	}
}

// builds builds the rules prepare computed (their Maglev tables) while
// prepare computes the next ones: the second, parallel part of computing
// rules, on up to one goroutine per CPU, started as the rules come. It
// reads nothing but its own rule (hash.Tables is safe for concurrent
// use), so every rule's result is what a serial build gives
// (docs/design.md#publication-that-costs-what-it-changes).
type builds struct {
	seed     uint64
	clock    dataplane.Clock
	sameSeed bool // the previous snapshot had this seed (a rule whose tables did not change keeps its digest then)
	queue    chan *computed
	workers  int
	sent     int
	wg       sync.WaitGroup
	mu       sync.Mutex
	errs     []error
}

func startBuilds(seed uint64, clock dataplane.Clock, sameSeed bool) *builds {
	return &builds{seed: seed, clock: clock, sameSeed: sameSeed}
}

// add hands a prepared rule to the builders; c must stay where it is
// until wait returns. Called on the control goroutine only.
func (b *builds) add(c *computed) {
	if b.queue == nil {
		b.queue = make(chan *computed, 64)
	}
	b.sent++
	if b.workers < engine.ControlProcs() && b.workers < b.sent {
		b.workers++
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for c := range b.queue {
				if err := b.one(c); err != nil {
					b.mu.Lock()
					b.errs = append(b.errs, err)
					b.mu.Unlock()
				}
			}
		}()
	}
	b.queue <- c
}

// wait returns once every rule added is built.
func (b *builds) wait() error {
	if b.queue == nil {
		return nil
	}
	close(b.queue)
	b.wg.Wait()
	return errors.Join(b.errs...)
}

// one builds one rule.
func (b *builds) one(c *computed) error {
	dr, err := dataplane.BuildRule(c.build, c.st, b.seed, b.clock)
	if err != nil {
		return err
	}
	c.built = dr
	// The digest hashes every slot: keep it while the tables and
	// the seed are the ones it was (or will be) computed from.
	if old := c.rt.status; old != nil && b.sameSeed && old.Built.SameTables(dr) && old.Built.Affinity == dr.Affinity {
		c.digest = old.digest
	} else {
		c.digest = &lazyDigest{seed: b.seed, rule: dr}
	}
	return nil
}

// finishRule gives a built rule its encapsulation templates and makes
// its status: the third, serial part of computing a rule.
func (d *daemon) finishRule(c *computed) {
	r, st, dr := c.rv.Rule, c.st, c.built
	for i := range dr.Backends {
		b := &dr.Backends[i]
		if !b.Present {
			continue
		}
		if t, err := d.template(r, netip.MustParseAddr(b.Name)); err == nil {
			b.Template = t
		}
	}
	c.status = &ruleStatus{Name: r.Name, VIP: r.VIP, Tier: st.Tier.String(), Reason: st.Reason, State: st, Rule: r, Slot: c.rt.slot,
		Eligible: len(st.Eligible), Warm: c.warm, Pending: c.pending, Built: dr, digest: c.digest, Counts: countBackends(st)}
}

// tableSize is the Maglev table size of rule r: maglev_table_size when
// the configuration sets it, else the size hash.TableSizeFor gives the
// backends the rule's file (or backend service) lists, so every appliance
// with the same files computes the same, whatever the backends' health.
func tableSize(cfg *config.Config, r *config.Rule) (uint32, error) {
	if cfg.MaglevTableSize != 0 {
		return uint32(cfg.MaglevTableSize), nil
	}
	m, err := hash.TableSizeFor(r.BackendCount())
	if err != nil {
		return 0, fmt.Errorf("rule %s: %w", r.Name, err)
	}
	return m, nil
}

// Status returns the latest published status; safe from any goroutine.
func (d *daemon) Status() publishedStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status
}
