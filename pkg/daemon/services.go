package daemon

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/health"
)

// Backend services at run time, and probes shared between rules
// (docs/design.md#backend-services). Load copies a service's keys into
// every rule that names it, so each rule is forwarded, computed and built
// as a rule with its own backends; what rules share is decided here:
//
//   - Health: one prober per backend of a share group, not one per rule.
//     A share group (shareOf) is a backend service's rules, or the rules
//     with their own backends whose checks are equal and direct: a direct
//     probe is the same packet from the appliance's own socket to
//     backend:port whatever rule asks for it. A data-path probe of a rule
//     with its own backends goes to that rule's VIP inside its
//     encapsulation, so it is shared with no other rule. The probe of
//     (group, backend) belongs to one of the group's rules that has the
//     backend, the first in file order whose VIP is of the backend's
//     family, else the first; every rule of the group reads its verdict
//     (probeKeyOf). A service's data-path probe therefore goes to that
//     rule's VIP and port inside its encapsulation. A reload regroups
//     the rules it changed or removed only, and keeps a prober that still
//     qualifies (adding a rule does not restart the probes); when the
//     prober's rule goes or leaves the group, the backend keeps its last
//     verdict until the new prober's first.
//   - A verdict names what it decides (proberCache.followers): the health
//     event and log line of a service's verdict, or of a verdict shared by
//     several rules with their own backends, carry the service (if any)
//     and the group's rules that have the backend, beside the prober rule
//     (health.go's healthChanged). Status, metrics and backend list show
//     each (rule, backend) with the shared verdict and its prober's last
//     probe; otherwise sharing is invisible.
//   - The CLI's overrides are kept under the service's name
//     (config.OverrideKey), so a drain, mark or weight moves every rule.
//   - With one health view and one overlay, the rules of a service and
//     family compute the same eligible set and so the same Maglev table
//     (tables are pure functions of their inputs: their table_digest is
//     equal); each rule still holds its own copy.

// shareKey names a share group: the rules of backend service service, or
// (service "") the rules with their own backends whose direct check is
// check.
type shareKey struct {
	service string
	check   health.Check
}

// shareOf returns the share group of r; false for a rule that shares its
// probes with no other (no health check, or a data-path check of a rule
// with its own backends).
func shareOf(r *config.Rule) (shareKey, bool) {
	switch {
	case r.HealthCheck.Type == config.HealthNone:
		return shareKey{}, false
	case r.Service != "":
		return shareKey{service: r.Service}, true
	case r.HealthCheck.Path == config.ProbeDirect:
		return shareKey{check: checkOf(r.HealthCheck)}, true
	}
	return shareKey{}, false
}

// proberCache maps every (rule, backend) of a share group to the rule
// whose probe speaks for it, for the configuration the control goroutine
// last grouped (regroup); status requests read it from their own
// goroutines.
type proberCache struct {
	mu     sync.Mutex
	last   *config.Config // the configuration grouped
	groups map[shareKey]*shareGroup
	of     map[string]*shareGroup // a rule's group; rules that share nothing are absent
}

// shareGroup is one share group's backends.
type shareGroup struct {
	key      shareKey
	backends map[netip.Addr]*sharedProbe
}

// sharedProbe is one backend of a share group: the rule that probes it
// and every rule of the group that has it, in file order.
type sharedProbe struct {
	prober string
	rules  []string
	dirty  bool // regroup's mark
}

// probeFollowers names what one prober's verdict decides: its backend
// service ("" for rules with their own backends) and the group's rules
// that have the backend (file order).
type probeFollowers struct {
	service string
	rules   []string
}

// probeMove is a backend of some rule whose verdict was read at from and
// is read at to from now on.
type probeMove struct{ from, to probeKey }

// regroup moves the rules named in names (nil: every rule) from their
// groups in the configuration grouped before to their groups in cfg
// (control goroutine), and chooses the prober of every backend whose
// rules changed. A prober that still qualifies keeps its backend, so a
// reload that adds a rule to a group does not restart its probes. It
// returns the verdicts that moved to another key — a backend whose prober
// changed, a named rule's backend now read from another prober or its own
// — and the rules that became or stopped being a prober of some backend:
// their targets change although their files may not. Without verdicts
// (withMoves false: a start that carries none) no verdict can move, and
// the moves are not listed: at a start they are a move for nearly every
// rule and backend, 90 000 at 1000 rules of 100 shared backends, and
// their list took a fifth of a second.
func (c *proberCache) regroup(cfg *config.Config, names []string, withMoves bool) (moved []probeMove, probers map[string]bool) {
	var only map[string]bool
	if names != nil {
		only = make(map[string]bool, len(names))
		for _, n := range names {
			only[n] = true
		}
	}
	named := func(name string) bool { return only == nil || only[name] }
	pos := make(map[string]int, len(cfg.Rules)) // file order
	for i, r := range cfg.Rules {
		pos[r.Name] = i
	}
	type slot struct {
		g      *shareGroup
		addr   netip.Addr
		sp     *sharedProbe
		before string // its prober before
	}
	var dirty []slot              // the backends whose rules change
	read := map[probeKey]string{} // a named rule's backend it read from another rule's probe: that rule
	mark := func(g *shareGroup, addr netip.Addr, sp *sharedProbe) {
		if !sp.dirty {
			sp.dirty = true
			dirty = append(dirty, slot{g, addr, sp, sp.prober})
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil {
		c.groups, c.of = map[shareKey]*shareGroup{}, map[string]*shareGroup{}
	}
	if c.last != nil {
		for _, r := range c.last.Rules {
			g := c.of[r.Name]
			if g == nil || !named(r.Name) {
				continue
			}
			delete(c.of, r.Name)
			for gi := range r.Groups {
				for _, b := range r.Groups[gi].Backends {
					sp := g.backends[b.Addr]
					if sp == nil {
						continue
					}
					mark(g, b.Addr, sp)
					if sp.prober != r.Name {
						read[probeKey{r.Name, b.Addr}] = sp.prober
					}
					sp.rules = slices.DeleteFunc(sp.rules, func(n string) bool { return n == r.Name })
				}
			}
		}
	}
	for _, r := range cfg.Rules {
		key, ok := shareOf(r)
		if !ok || !named(r.Name) {
			continue
		}
		g := c.groups[key]
		if g == nil {
			g = &shareGroup{key: key, backends: map[netip.Addr]*sharedProbe{}}
			c.groups[key] = g
		}
		c.of[r.Name] = g
		at := pos[r.Name]
		for gi := range r.Groups {
			for _, b := range r.Groups[gi].Backends {
				sp := g.backends[b.Addr]
				if sp == nil {
					sp = &sharedProbe{}
					g.backends[b.Addr] = sp
				}
				mark(g, b.Addr, sp)
				if n := len(sp.rules); n == 0 || pos[sp.rules[n-1]] < at {
					sp.rules = append(sp.rules, r.Name) // in file order already
					continue
				}
				i, found := slices.BinarySearchFunc(sp.rules, at, func(n string, at int) int { return cmp.Compare(pos[n], at) })
				if !found {
					sp.rules = slices.Insert(sp.rules, i, r.Name)
				}
			}
		}
	}
	probers = map[string]bool{}
	for _, s := range dirty {
		s.sp.dirty = false
		now := ""
		if len(s.sp.rules) == 0 {
			delete(s.g.backends, s.addr)
			if len(s.g.backends) == 0 && c.groups[s.g.key] == s.g {
				delete(c.groups, s.g.key) // a rule without backends may still point at it: harmless
			}
		} else {
			now = chooseProber(cfg, pos, s.sp.rules, s.before, s.addr)
			s.sp.prober = now
		}
		if now == s.before {
			continue
		}
		if s.before != "" {
			probers[s.before] = true
			if now != "" && withMoves {
				moved = append(moved, probeMove{probeKey{s.before, s.addr}, probeKey{now, s.addr}})
			}
		}
		if now != "" {
			probers[now] = true
		}
	}
	// A named rule's backend whose verdict is now read elsewhere: a rule
	// that left a group probes itself, one that joined reads the group's.
	for _, r := range cfg.Rules {
		if !withMoves || !named(r.Name) || r.HealthCheck.Type == config.HealthNone {
			continue
		}
		g := c.of[r.Name]
		for gi := range r.Groups {
			for _, b := range r.Groups[gi].Backends {
				before, now := r.Name, r.Name
				if p, ok := read[probeKey{r.Name, b.Addr}]; ok && p != "" {
					before = p
				}
				if g != nil {
					if sp := g.backends[b.Addr]; sp != nil {
						now = sp.prober
					}
				}
				if before != now {
					moved = append(moved, probeMove{probeKey{before, b.Addr}, probeKey{now, b.Addr}})
				}
			}
		}
	}
	c.last = cfg
	return moved, probers
}

// chooseProber picks the prober of backend addr among rules (file order,
// not empty): before if it still qualifies, else the first rule whose VIP
// is of addr's family, else the first. A data-path probe goes to its
// rule's VIP, so a VIP of the backend's family keeps the probe's packets
// in one family.
func chooseProber(cfg *config.Config, pos map[string]int, rules []string, before string, addr netip.Addr) string {
	same := func(name string) bool { return cfg.Rules[pos[name]].VIP.Is4() == addr.Is4() }
	first := slices.IndexFunc(rules, same)
	if slices.Contains(rules, before) && (first < 0 || same(before)) {
		return before
	}
	if first >= 0 {
		return rules[first]
	}
	return rules[0]
}

// prober returns the rule that probes backend addr for rule name: name
// itself unless name shares the probe with rules of its group.
func (c *proberCache) prober(name string, addr netip.Addr) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.of[name]; g != nil {
		if sp := g.backends[addr]; sp != nil && sp.prober != "" {
			return sp.prober
		}
	}
	return name
}

// followers names the backend service and rules that the verdict of key
// (a prober rule and backend) decides; ok is false for a verdict that is
// one rule's only (a rule with its own backends whose probe no other
// rule shares).
func (c *proberCache) followers(key probeKey) (probeFollowers, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.of[key.rule]
	if g == nil {
		return probeFollowers{}, false
	}
	sp := g.backends[key.addr]
	if sp == nil || sp.prober != key.rule || (g.key.service == "" && len(sp.rules) < 2) {
		return probeFollowers{}, false
	}
	return probeFollowers{service: g.key.service, rules: slices.Clone(sp.rules)}, true
}

// probeKeyOf is the key of the verdict that decides backend addr of rule
// r: its own, or its share group's prober rule's.
func (d *daemon) probeKeyOf(r *config.Rule, addr netip.Addr) probeKey {
	return probeKey{d.probers.prober(r.Name, addr), addr}
}

// regroupProbes regroups the rules named in names (nil: every rule) under
// d.cfg and returns the rules that became or stopped being probers (their
// targets change). A backend whose prober moved keeps its last verdict
// until the new prober's first; the moved-from rule's verdict, now read by
// nobody, is forgotten so that it cannot come back stale.
func (d *daemon) regroupProbes(names []string) map[string]bool {
	moved, probers := d.probers.regroup(d.cfg, names, len(d.probes) > 0)
	for _, m := range moved {
		from, to := m.from, m.to
		p, ok := d.probes[from]
		if !ok {
			continue
		}
		if q, has := d.probes[to]; !has {
			d.setProbe(to, p)
		} else if q.health != p.health || q.weight != p.weight || q.weightState != p.weightState {
			// The new prober brought its own verdict from another group
			// (the checker carries its state across the change of
			// check): every rule that reads it is computed again.
			if f, ok := d.probers.followers(to); ok {
				d.touch(f.rules...)
			}
		}
	}
	for _, m := range moved {
		if d.probers.prober(m.from.rule, m.from.addr) != m.from.rule {
			d.forgetProbe(m.from)
		}
	}
	return probers
}

// ruleOrService reports whether rule r is the one the CLI names with
// name: the rule's own name, or its backend service's.
func ruleOrService(r *config.Rule, name string) bool {
	return r.Name == name || (r.Service != "" && r.Service == name)
}

// changeTarget names what a CLI change given with name applies to: the
// rule, or the backend service and every rule of it.
func changeTarget(cfg *config.Config, name string) string {
	key := config.OverrideKey(cfg, name)
	rules := cfg.RulesOf(key)
	if len(rules) == 0 || (len(rules) == 1 && rules[0].Service == "") {
		return "rule " + name
	}
	names := make([]string, len(rules))
	for i, r := range rules {
		names[i] = r.Name
	}
	return fmt.Sprintf("backend service %s (rules %s)", key, strings.Join(names, ", "))
}

// serviceRules lists the published rules that name backend service name.
func (st *publishedStatus) serviceRules(name string) []string {
	var out []string
	for i := range st.Rules {
		if r := st.Rules[i].Rule; r != nil && r.Service == name {
			out = append(out, r.Name)
		}
	}
	return out
}
