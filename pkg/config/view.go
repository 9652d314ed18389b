package config

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
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

// SameView reports whether a and b are the same view of the same rule
// source: b was carried over from a by ApplyFrom (or the other way), so
// nothing that decides the rule's behaviour changed. O(1).
func SameView(a, b *RuleView) bool {
	return a.Rule.SameSource(b.Rule) && len(a.Backends) == len(b.Backends) &&
		(len(a.Backends) == 0 || &a.Backends[0] == &b.Backends[0])
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
	// The rules' views are independent (applyRule reads cfg, st and
	// byKey only): a start lays out every backend of every rule, 100 000
	// at 1000 rules of 100, so the rules are shared out among the CPUs in
	// runs of applyRun.
	const applyRun = 64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), (len(cfg.Rules)+applyRun-1)/applyRun) {
		wg.Go(func() {
			for {
				from := int(next.Add(applyRun)) - applyRun
				if from >= len(cfg.Rules) {
					return
				}
				for ri := from; ri < min(from+applyRun, len(cfg.Rules)); ri++ {
					v.Rules[ri] = applyRule(cfg.Rules[ri], st, byKey)
				}
			}
		})
	}
	wg.Wait()
	v.Stale = st.stale(cfg)
	return v
}

// ApplyFrom is Apply for a configuration that follows prev's (a reload
// through a Loader): a rule parsed from the same bytes as one of prev's,
// whose overrides in st (its service's: OverrideKey) are those it had in
// prevState, keeps prev's backend views (SameView then holds); the others
// are computed. The cost is the rules that changed, one pass over the
// rules and one over the overrides.
func ApplyFrom(prev *View, prevState *State, cfg *Config, st *State) *View {
	if prev == nil || prevState == nil {
		return Apply(cfg, st)
	}
	byKey := st.byBackend()
	now, before := st.byRule(), prevState.byRule()
	prior := pairRules(len(prev.Rules), len(cfg.Rules), func(i int) *Rule { return prev.Rules[i].Rule }, func(i int) *Rule { return cfg.Rules[i] })
	v := &View{Rules: make([]RuleView, len(cfg.Rules))}
	for ri, r := range cfg.Rules {
		if j := prior[ri]; j >= 0 {
			if p := &prev.Rules[j]; r.SameSource(p.Rule) && sameOverrides(now[r.ServiceName()], before[r.ServiceName()]) {
				v.Rules[ri] = RuleView{Rule: r, Backends: p.Backends}
				continue
			}
		}
		v.Rules[ri] = applyRule(r, st, byKey)
	}
	v.Stale = st.stale(cfg)
	return v
}

// Prior returns, for each rule of v (in its order), the index in prev of
// the rule of the same name, or -1 (pairRules).
func (v *View) Prior(prev *View) []int {
	return pairRules(len(prev.Rules), len(v.Rules), func(i int) *Rule { return prev.Rules[i].Rule }, func(i int) *Rule { return v.Rules[i].Rule })
}

// pairRules returns, for each of the m rules of next, the index of the
// one of the n rules of prev that has its name, or -1. Both are in file
// order (a Config's and its View's rules are), so the rules a file still
// holds are paired by walking both in step, without a table of every
// name; only the rules left over (a file added, removed or renamed, or a
// rule renamed) are paired through a table of their names.
func pairRules(n, m int, prev, next func(int) *Rule) []int {
	out := make([]int, m)
	var loneNext []int
	var lonePrev map[string]int
	alone := func(j int) {
		if lonePrev == nil {
			lonePrev = map[string]int{}
		}
		lonePrev[prev(j).Name] = j
	}
	for i, j := 0, 0; i < m || j < n; {
		switch {
		case j == n || i < m && next(i).File < prev(j).File:
			loneNext = append(loneNext, i)
			i++
		case i == m || prev(j).File < next(i).File:
			alone(j)
			j++
		default: // one file
			if next(i).Name == prev(j).Name {
				out[i] = j
			} else {
				loneNext = append(loneNext, i)
				alone(j)
			}
			i++
			j++
		}
	}
	for _, i := range loneNext {
		if j, ok := lonePrev[next(i).Name]; ok {
			out[i] = j
		} else {
			out[i] = -1
		}
	}
	return out
}

// byRule lists the overrides of each rule or backend service (the
// names OverrideKey gives).
func (st *State) byRule() map[string][]*Override {
	m := map[string][]*Override{}
	for i := range st.Overrides {
		o := &st.Overrides[i]
		m[o.Rule] = append(m[o.Rule], o)
	}
	return m
}

// sameOverrides reports whether two lists of one rule's overrides (in
// state order) say the same.
func sameOverrides(a, b []*Override) bool {
	return slices.EqualFunc(a, b, func(x, y *Override) bool {
		return x.Backend == y.Backend && x.RoleSet == y.RoleSet && x.Role == y.Role && x.Drained == y.Drained &&
			x.DrainedAt.Equal(y.DrainedAt) && x.WeightSet == y.WeightSet && x.Weight == y.Weight
	})
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
		r := cfg.Rules[ri]
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
