package config

import (
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// View is the effective configuration: the rule files with the overlay
// applied, each value with its source (shown by `xlb backend list`).
type View struct {
	Rules []RuleView
	// Stale lists overrides that match no rule or backend of the
	// configuration (a reload removed it), or no longer apply. They stay
	// in the state file, so a backend that comes back gets its drain back,
	// until `xlb backend reset` removes them.
	Stale []Issue
}

// RuleView is one rule with its effective backends, in file order.
type RuleView struct {
	Rule     *Rule
	Backends []BackendView
}

// BackendView is one backend's effective settings.
type BackendView struct {
	Addr           netip.Addr
	Group          string // the config group it belongs to
	Zone           string
	CapacityScaler float64
	Preferred      bool

	Role       Role
	RoleSource Source

	Drained       bool
	DrainedAt     time.Time
	DrainedSource Source

	// HasWeight false: the weight comes from the health check (or, without
	// WEIGHTED_MAGLEV, weights are not used).
	Weight       uint16
	HasWeight    bool
	WeightSource Source
}

// Apply lays st over cfg. Neither is changed; the View shares cfg's rules.
// It costs one pass over the backends and one over the overrides.
func Apply(cfg *Config, st *State) *View {
	byKey := st.byBackend()
	v := &View{Rules: make([]RuleView, len(cfg.Rules))}
	for ri := range cfg.Rules {
		v.Rules[ri] = applyRule(&cfg.Rules[ri], st, byKey)
	}
	v.Stale = st.stale(cfg)
	return v
}

// Reapply is Apply after a change of st that concerns the overrides of
// name only (the CLI's changes; name is a rule or a backend service): the
// result recomputes the views of the rules that follow those overrides
// (OverrideKey) and shares every other rule's view with v, and its Stale
// is computed again. v is not changed.
func (v *View) Reapply(cfg *Config, st *State, name string) *View {
	out := &View{Rules: slices.Clone(v.Rules)}
	byKey := st.byBackend()
	key := OverrideKey(cfg, name)
	for i := range out.Rules {
		if r := out.Rules[i].Rule; r.Name == name || r.ServiceName() == key {
			out.Rules[i] = applyRule(out.Rules[i].Rule, st, byKey)
		}
	}
	out.Stale = st.stale(cfg)
	return out
}

// overrideKey names the backend of a rule an override is about.
type overrideKey struct {
	rule    string
	backend netip.Addr
}

// byBackend indexes the overrides by rule and backend, in state order.
func (st *State) byBackend() map[overrideKey][]int {
	m := make(map[overrideKey][]int, len(st.Overrides))
	for oi := range st.Overrides {
		o := &st.Overrides[oi]
		k := overrideKey{o.Rule, o.Backend}
		m[k] = append(m[k], oi)
	}
	return m
}

// applyRule is one rule's view.
func applyRule(r *Rule, st *State, byKey map[overrideKey][]int) RuleView {
	rv := RuleView{Rule: r, Backends: make([]BackendView, 0, r.BackendCount())}
	for gi := range r.Groups {
		g := &r.Groups[gi]
		for _, gb := range g.Backends {
			b := BackendView{
				Addr: gb.Addr, Group: g.Name, Zone: g.Zone,
				CapacityScaler: g.CapacityScaler, Preferred: g.Preferred,
				Role: g.Role, Weight: gb.Weight, HasWeight: gb.HasWeight,
			}
			for _, oi := range byKey[overrideKey{r.ServiceName(), gb.Addr}] {
				o := &st.Overrides[oi]
				if o.RoleSet {
					b.Role, b.RoleSource = o.Role, SourceCLI
				}
				if o.Drained {
					b.Drained, b.DrainedAt, b.DrainedSource = true, o.DrainedAt, SourceCLI
				}
				if o.WeightSet && r.LocalityLBPolicy == WeightedMaglev {
					b.Weight, b.HasWeight, b.WeightSource = o.Weight, true, SourceCLI
				}
			}
			rv.Backends = append(rv.Backends, b)
		}
	}
	return rv
}

// stale lists the overrides that apply to nothing, in state order: first
// the weights of rules that use no weights, then those whose rule (or
// backend service) or backend is gone.
func (st *State) stale(cfg *Config) []Issue {
	if len(st.Overrides) == 0 {
		return nil
	}
	rules := make(map[string]*Rule, len(cfg.Rules))
	byService := map[string][]*Rule{} // the rules that follow a key's overrides
	for ri := range cfg.Rules {
		r := &cfg.Rules[ri]
		rules[r.Name] = r
		byService[r.ServiceName()] = append(byService[r.ServiceName()], r)
	}
	var weights, unused []Issue
	for oi := range st.Overrides {
		o := &st.Overrides[oi]
		users := byService[o.Rule]
		has := slices.ContainsFunc(users, func(r *Rule) bool { return r.has(o.Backend) })
		switch {
		case len(users) == 0:
			msg := fmt.Sprintf("rule %q is not in the configuration; override kept, not applied", o.Rule)
			if r := rules[o.Rule]; r != nil && r.Service != "" && r.Service != o.Rule {
				msg = staleServiceOverride(r)
			}
			unused = append(unused, st.issue(oi, "", msg))
		case !has:
			unused = append(unused, st.issue(oi, "", fmt.Sprintf("rule %q has no backend %s; override kept, not applied", o.Rule, o.Backend)))
		case o.WeightSet:
			for _, r := range users {
				if r.has(o.Backend) && r.LocalityLBPolicy != WeightedMaglev {
					weights = append(weights, st.issue(oi, "weight",
						fmt.Sprintf("weight override ignored: rule %q uses %s", r.Name, r.LocalityLBPolicy)))
				}
			}
		}
	}
	return append(weights, unused...)
}

// has reports whether addr is one of r's backends.
func (r *Rule) has(addr netip.Addr) bool {
	for gi := range r.Groups {
		for _, b := range r.Groups[gi].Backends {
			if b.Addr == addr {
				return true
			}
		}
	}
	return false
}
