package daemon

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/xlbnet/xlb/pkg/config"
)

// Backend services at run time (docs/design.md#backend-services). Load
// copies a service's keys into every rule that names it, so each rule is
// forwarded, computed and built as a rule with its own backends; what the
// rules of one service share is decided here:
//
//   - Health: one prober per backend of a service, not one per rule. The
//     probe of (service, backend) belongs to one of the service's rules
//     that has the backend, the first in file order whose VIP is of the
//     backend's family, else the first; every rule of the service reads
//     its verdict (probeKeyOf). A data-path probe therefore goes to that
//     rule's VIP and port inside its encapsulation. A reload keeps a
//     prober that still qualifies (adding a rule does not restart the
//     probes); when the prober's rule goes, the backend keeps its last
//     verdict until the new prober's first.
//   - A verdict names what it decides (proberCache.followers): its health
//     event and log line carry the service and its rules that have the
//     backend, beside the prober rule (health.go's healthChanged).
//   - The CLI's overrides are kept under the service's name
//     (config.OverrideKey), so a drain, mark or weight moves every rule.
//   - With one health view and one overlay, the rules of a service and
//     family compute the same eligible set and so the same Maglev table
//     (tables are pure functions of their inputs: their table_digest is
//     equal); each rule still holds its own copy.

// proberCache maps (service, backend) to the rule whose probe speaks for
// it, for the configuration the control goroutine last gave the checker
// (healthTargets); status requests read it from their own goroutines.
type proberCache struct {
	mu     sync.Mutex
	by     map[probeKey]string           // key.rule is the service's name
	follow map[probeKey]serviceFollowers // key.rule is the prober's name
}

// serviceFollowers names what one prober's verdict decides: its backend
// service and the service's rules that have the backend (file order).
type serviceFollowers struct {
	service string
	rules   []string
}

// set computes the probers of cfg's services (control goroutine) and
// returns the backends whose prober moved to another rule: from the old
// key to the new. A prober that still qualifies keeps its backends, so a
// reload that adds a rule to a service does not restart its probes.
func (c *proberCache) set(cfg *config.Config) map[probeKey]probeKey {
	c.mu.Lock()
	old := c.by
	c.mu.Unlock()
	type candidates struct {
		first, firstSame string // first rule with the backend; of its family
		old, oldSame     bool   // the old prober has it; of its family
		rules            []string
	}
	cands := map[probeKey]*candidates{}
	for i := range cfg.Rules {
		r := cfg.Rules[i]
		if r.Service == "" {
			continue
		}
		for _, gb := range r.Backends() {
			k := probeKey{r.Service, gb.Addr}
			same := gb.Addr.Is4() == r.VIP.Is4()
			cand := cands[k]
			if cand == nil {
				cand = &candidates{first: r.Name}
				cands[k] = cand
			}
			cand.rules = append(cand.rules, r.Name)
			if same && cand.firstSame == "" {
				cand.firstSame = r.Name
			}
			if old[k] == r.Name {
				cand.old, cand.oldSame = true, same
			}
		}
	}
	by := make(map[probeKey]string, len(cands))
	for k, cand := range cands {
		switch {
		case cand.old && (cand.oldSame || cand.firstSame == ""):
			by[k] = old[k]
		case cand.firstSame != "":
			by[k] = cand.firstSame
		default:
			by[k] = cand.first
		}
	}
	moved := map[probeKey]probeKey{}
	follow := make(map[probeKey]serviceFollowers, len(by))
	for k, name := range by {
		if was, ok := old[k]; ok && was != name {
			moved[probeKey{was, k.addr}] = probeKey{name, k.addr}
		}
		follow[probeKey{name, k.addr}] = serviceFollowers{service: k.rule, rules: cands[k].rules}
	}
	c.mu.Lock()
	c.by, c.follow = by, follow
	c.mu.Unlock()
	return moved
}

// followers names the backend service and rules that the verdict of key
// (a prober rule and backend) decides; ok is false for a rule with its
// own backends, whose verdict is its own only.
func (c *proberCache) followers(key probeKey) (serviceFollowers, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.follow[key]
	return f, ok
}

// probeKeyOf is the key of the verdict that decides backend addr of rule
// r: its own for a rule with its own backends, else its service's prober
// rule's.
func (d *daemon) probeKeyOf(r *config.Rule, addr netip.Addr) probeKey {
	if r.Service == "" {
		return probeKey{r.Name, addr}
	}
	d.probers.mu.Lock()
	name, ok := d.probers.by[probeKey{r.Service, addr}]
	d.probers.mu.Unlock()
	if ok {
		return probeKey{name, addr}
	}
	return probeKey{r.Name, addr}
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
