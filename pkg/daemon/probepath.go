package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/health"
	"github.com/xlbnet/xlb/pkg/probepath"
)

// dataPathProbes is the daemon's side of data-path probes
// (docs/design.md#data-path-probes): after every publication the control
// goroutine publishes which rules probe through the data path, with the
// snapshot whose templates their probes use; the probers read it through
// dialProbe and the path's reader through probeRoute. The probe path
// itself (pkg/probepath: its TUN, policy rules and reader) is opened when
// a rule first needs it and closed when the daemon ends.
type dataPathProbes struct {
	routes atomic.Pointer[probeRoutes]
	ready  chan struct{} // closed by the first publication
	once   sync.Once

	path    atomic.Pointer[probepath.Path]
	openErr atomic.Pointer[error]

	// Owned by the control goroutine.
	lastTry time.Time      // when opening last failed
	logged  *config.Config // the configuration whose direct-by-default rules were logged
	walked  int            // rules whose backends publications walked, for tests
}

func newDataPathProbes() *dataPathProbes {
	return &dataPathProbes{ready: make(chan struct{})}
}

// probeRoutes is one publication: the snapshot and, for every rule whose
// health check takes the data path, its slot, VIP and why backends without
// a template have none.
type probeRoutes struct {
	snap  *dataplane.Snapshot
	rules map[string]probeRule
}

type probeRule struct {
	slot  uint16
	vip   netip.Addr
	noHop map[netip.Addr]error
}

// rule returns the route of the rule named name; pr may be nil.
func (pr *probeRoutes) rule(name string) (probeRule, bool) {
	if pr == nil {
		return probeRule{}, false
	}
	r, ok := pr.rules[name]
	return r, ok
}

// reopenAfter spaces attempts to open the probe path after a failure.
const reopenAfter = time.Minute

// publishProbeRoutes runs on the control goroutine after every
// publication of snap, which computed the rules of done. A rule the
// publication did not compute keeps its route from the one before (its
// backends, templates and next hops are what they were: a change of any
// of them computes the rule), so a publication walks the backends of the
// data-path rules it computed, not of every rule
// (docs/design.md#data-path-probes).
func (d *daemon) publishProbeRoutes(snap *dataplane.Snapshot, done []computed) {
	dp := d.dataPath
	if dp == nil { // a test's daemon without newDaemon
		return
	}
	prev := dp.routes.Load()
	again := make(map[string]bool, len(done))
	for i := range done {
		again[done[i].status.Name] = true
	}
	pr := &probeRoutes{snap: snap, rules: map[string]probeRule{}}
	for i := range d.view.Rules {
		r := d.view.Rules[i].Rule
		if r.HealthCheck.Type == config.HealthNone || r.HealthCheck.Path != config.ProbeDataPath {
			continue
		}
		rt := d.rules[r.Name]
		if rt == nil || int(rt.slot) >= len(snap.Rules) {
			continue
		}
		if old, ok := prev.rule(r.Name); ok && !again[r.Name] && old.slot == rt.slot && old.vip == r.VIP {
			pr.rules[r.Name] = old
			continue
		}
		dp.walked++
		rule := probeRule{slot: rt.slot, vip: r.VIP, noHop: map[netip.Addr]error{}}
		for _, b := range snap.Rules[rt.slot].Backends {
			if b.Present && b.Template == nil {
				addr := netip.AddrFrom16(b.Addr).Unmap()
				rule.noHop[addr] = d.noTemplate(r, addr)
			}
		}
		pr.rules[r.Name] = rule
	}
	// Open before publishing, so that no probe finds its rule routed and
	// the path not yet there.
	if len(pr.rules) > 0 && dp.path.Load() == nil && time.Since(dp.lastTry) >= reopenAfter {
		d.openProbePath()
	}
	dp.routes.Store(pr)
	dp.once.Do(func() { close(dp.ready) })
	if dp.logged != d.cfg {
		dp.logged = d.cfg
		if names := directByDefault(d.cfg); len(names) > 0 {
			d.log.Warn("health checks probe backend:port directly: health_check_path is not set in xlb.toml (new configurations set DATA_PATH, which probes each rule's VIP through its encapsulation)", "rules", strings.Join(names, ","))
		}
	}
}

// directByDefault lists the checked rules that probe directly while
// xlb.toml does not choose a path: an existing configuration reads as it
// did before data-path probes, and its operator should know.
func directByDefault(cfg *config.Config) []string {
	if cfg.HealthCheckPathSet {
		return nil
	}
	var names []string
	for i := range cfg.Rules {
		if hc := cfg.Rules[i].HealthCheck; hc.Type != config.HealthNone && hc.Path == config.ProbeDirect {
			names = append(names, cfg.Rules[i].Name)
		}
	}
	return names
}

// noTemplate says why a backend published without a template has none.
func (d *daemon) noTemplate(r *config.Rule, addr netip.Addr) error {
	nh, ok := d.nexthops[nhKey{addr, r.Encap.Type == config.EncapDirect}]
	switch {
	case !ok:
		return errors.New("no next hop: not resolved yet")
	case nh.err != nil:
		return fmt.Errorf("no next hop: %w", nh.err)
	}
	if _, err := d.template(r, addr); err != nil {
		return err
	}
	return errors.New("no encapsulation template")
}

// openProbePath opens the probe path on the control goroutine.
func (d *daemon) openProbePath() {
	p, err := probepath.Open(probepath.Options{Interface: d.cfg.Interface, Routes: d.probeRoute, Log: d.log})
	if err != nil {
		d.dataPath.lastTry = time.Now()
		d.dataPath.openErr.Store(&err)
		d.log.Error("data-path probes unavailable: their checks fail until it opens (tried again at a recomputation a minute or more later)", "err", err)
		return
	}
	d.dataPath.openErr.Store(nil)
	d.dataPath.path.Store(p)
}

// closeProbePath removes the probe path (its TUN and policy rules); the
// checker has stopped.
func (d *daemon) closeProbePath() {
	if d.dataPath == nil {
		return
	}
	if p := d.dataPath.path.Swap(nil); p != nil {
		if err := p.Close(); err != nil {
			d.log.Error("remove the data-path probes' TUN and rules", "err", err)
		}
	}
}

// dialProbe is the checker's dialer: through the probe path for the rules
// whose check takes the data path, else the appliance's own socket to
// backend:port.
func (d *daemon) dialProbe(ctx context.Context, network string, key health.Key, addr netip.AddrPort) (net.Conn, error) {
	dp := d.dataPath
	select {
	case <-dp.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("data path: nothing published yet: %w", ctx.Err())
	}
	if _, ok := dp.routes.Load().rules[key.Rule]; !ok {
		return health.DirectDial(ctx, network, key, addr)
	}
	p := dp.path.Load()
	if p == nil {
		if err := dp.openErr.Load(); err != nil {
			return nil, fmt.Errorf("data path unavailable: %w", *err)
		}
		return nil, errors.New("data path unavailable: not open")
	}
	return p.Dial(ctx, network, key, addr)
}

// probeRoute is the probe path's Routes: the target's VIP and the
// template its backend has in the published snapshot, the one the workers
// use. Every configured backend is in it: a reload publishes before it
// gives the checker new targets.
func (d *daemon) probeRoute(key health.Key) (probepath.Route, error) {
	pr := d.dataPath.routes.Load()
	rule, ok := pr.rules[key.Rule]
	if !ok {
		return probepath.Route{}, fmt.Errorf("rule %s does not probe through the data path", key.Rule)
	}
	want := key.Backend.As16()
	for i := range pr.snap.Rules[rule.slot].Backends {
		b := &pr.snap.Rules[rule.slot].Backends[i]
		if !b.Present || b.Addr != want {
			continue
		}
		if b.Template == nil {
			if why := rule.noHop[key.Backend]; why != nil {
				return probepath.Route{}, why
			}
			return probepath.Route{}, errors.New("no encapsulation template")
		}
		return probepath.Route{VIP: rule.vip, Template: b.Template, Seed: pr.snap.Seed}, nil
	}
	return probepath.Route{}, fmt.Errorf("backend %s is not in rule %s as published", key.Backend, key.Rule)
}

// dataPathHost makes a data-path check's default Host (and SNI) name the
// address it probes, the VIP, as Google Cloud's checks name the
// forwarding rule's address.
func dataPathHost(r *config.Rule, c *health.Check) {
	if r.HealthCheck.Path != config.ProbeDataPath || c.Host != "" {
		return
	}
	def := uint16(80)
	if c.Kind == health.HTTPS || c.Kind == health.SSL || c.TLS {
		def = 443
	}
	switch {
	case c.Port != def:
		c.Host = netip.AddrPortFrom(r.VIP, c.Port).String()
	case r.VIP.Is6():
		c.Host = "[" + r.VIP.String() + "]"
	default:
		c.Host = r.VIP.String()
	}
}
