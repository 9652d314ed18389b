package config

import (
	"fmt"
	"net/netip"
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
func Apply(cfg *Config, st *State) *View {
	v := &View{}
	used := make([]bool, len(st.Overrides))
	for ri := range cfg.Rules {
		r := &cfg.Rules[ri]
		rv := RuleView{Rule: r}
		for _, gb := range r.Backends() {
			b := BackendView{
				Addr: gb.Addr, Group: gb.Group.Name, Zone: gb.Group.Zone,
				CapacityScaler: gb.Group.CapacityScaler, Preferred: gb.Group.Preferred,
				Role: gb.Group.Role, Weight: gb.Weight, HasWeight: gb.HasWeight,
			}
			for oi := range st.Overrides {
				o := &st.Overrides[oi]
				if o.Rule != r.ServiceName() || o.Backend != gb.Addr {
					continue
				}
				used[oi] = true
				if o.RoleSet {
					b.Role, b.RoleSource = o.Role, SourceCLI
				}
				if o.Drained {
					b.Drained, b.DrainedAt, b.DrainedSource = true, o.DrainedAt, SourceCLI
				}
				if o.WeightSet {
					if r.LocalityLBPolicy == WeightedMaglev {
						b.Weight, b.HasWeight, b.WeightSource = o.Weight, true, SourceCLI
					} else {
						v.Stale = append(v.Stale, st.issue(oi, "weight",
							fmt.Sprintf("weight override ignored: rule %q uses %s", r.Name, r.LocalityLBPolicy)))
					}
				}
			}
			rv.Backends = append(rv.Backends, b)
		}
		v.Rules = append(v.Rules, rv)
	}
	for oi, u := range used {
		if u {
			continue
		}
		o := &st.Overrides[oi]
		msg := fmt.Sprintf("rule %q is not in the configuration; override kept, not applied", o.Rule)
		if r := cfg.Rule(o.Rule); r != nil && r.Service != "" && r.Service != o.Rule {
			msg = staleServiceOverride(r)
		} else if len(cfg.RulesOf(o.Rule)) > 0 {
			msg = fmt.Sprintf("rule %q has no backend %s; override kept, not applied", o.Rule, o.Backend)
		}
		v.Stale = append(v.Stale, st.issue(oi, "", msg))
	}
	return v
}
