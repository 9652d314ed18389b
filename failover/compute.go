package failover

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// work is the scratch of one Compute.
type work struct {
	p      Policy
	now    time.Time
	prev   *State
	st     *State
	groups map[string]*groupInfo
	// failoverConfigured: at least one group has RoleFailover.
	failoverConfigured bool
}

type groupInfo struct {
	g           Group
	state       *GroupState
	scalerMilli uint32 // capacity in thousandths; 0 = no new connections
}

// Compute derives a rule's eligible set and the conntrack validity data
// from its policy, groups and backends at now. prev is the previous
// output for the same rule (nil at start); the inputs may come in any
// order. The result is new and immutable; inputs and prev are not
// modified. It runs on the control-plane goroutine, never on the packet
// path, and allocates freely.
func Compute(p Policy, groups []Group, backends []Backend, prev *State, now time.Time) (*State, error) {
	if err := Validate(p, groups, backends); err != nil {
		return nil, fmt.Errorf("compute eligible set: %w", err)
	}
	w := &work{p: p, now: now, prev: prev, st: &State{At: now}, groups: make(map[string]*groupInfo, len(groups))}

	sortedGroups := slices.Clone(groups)
	slices.SortFunc(sortedGroups, func(a, b Group) int { return cmp.Compare(a.Name, b.Name) })
	sortedBackends := slices.Clone(backends)
	slices.SortFunc(sortedBackends, func(a, b Backend) int { return cmp.Compare(a.Name, b.Name) })

	w.buildGroups(sortedGroups, sortedBackends)
	w.autoCapacityDrain()
	w.buildBackends(sortedBackends)
	w.selectEligible()
	w.unhealthyGenerations()
	w.zoneViews()
	w.finish()
	return w.st, nil
}

func (w *work) buildGroups(groups []Group, backends []Backend) {
	w.st.Groups = make([]GroupState, len(groups))
	for i, g := range groups {
		w.st.Groups[i] = GroupState{Name: g.Name, Role: g.Role, Zone: g.Zone, CapacityScaler: g.CapacityScaler, Preferred: g.Preferred}
		w.groups[g.Name] = &groupInfo{g: g, state: &w.st.Groups[i], scalerMilli: scalerMilli(g.CapacityScaler)}
		if g.Role == RoleFailover {
			w.failoverConfigured = true
		}
	}
	for i := range backends {
		b := &backends[i]
		if b.Removed {
			continue
		}
		gs := w.groups[b.Group].state
		gs.Members++
		if b.Health == HealthHealthy {
			gs.Healthy++
		}
	}
}

// scalerMilli quantises a capacity scaler to thousandths; any positive
// scaler keeps at least 1/1000 so it never turns into "no new connections".
func scalerMilli(s float64) uint32 {
	m := uint32(math.Round(s * 1000))
	if m == 0 && s > 0 {
		m = 1
	}
	return m
}

func (w *work) prevBackend(name string) *BackendState {
	if w.prev == nil {
		return nil
	}
	b, _ := w.prev.Backend(name)
	return b
}

func (w *work) prevGroup(name string) *GroupState {
	if w.prev == nil {
		return nil
	}
	g, _ := w.prev.Group(name)
	return g
}

func (w *work) buildBackends(backends []Backend) {
	w.st.Backends = make([]BackendState, len(backends))
	for i := range backends {
		in := &backends[i]
		gi := w.groups[in.Group]
		b := &w.st.Backends[i]
		*b = BackendState{
			Name: in.Name, ID: in.ID, Group: in.Group, Role: gi.g.Role, Zone: gi.g.Zone,
			Health: in.Health, WeightState: in.WeightState, Admin: in.Admin, Removed: in.Removed,
		}
		if in.WeightState == WeightOK {
			b.Weight = in.Weight
		}
		pb := w.prevBackend(in.Name)
		if pb != nil {
			b.UnhealthyGen = pb.UnhealthyGen
			b.DrainGen, b.DrainFloor, b.DrainUntil = pb.DrainGen, pb.DrainFloor, pb.DrainUntil
			b.DrainReason, b.DepartedAt, b.admin = pb.DrainReason, pb.DepartedAt, pb.admin
		}

		departed := in.Admin == AdminDrained || in.Removed
		switch {
		case departed && !b.admin:
			at, reason := departure(in, w.now)
			b.depart(at, w.p.ConnectionDrainingTimeout, reason)
			b.admin = true
		case departed && in.Removed:
			b.DrainReason = DrainRemoved // drained first, then removed: the deadline stands
		case !departed:
			b.admin = false // undrained: older entries keep their deadline
		}

		b.InService = !departed && gi.scalerMilli > 0 && !gi.state.AutoDrained
		b.Usable = b.InService && b.Health == HealthHealthy && (!w.p.WeightedMaglev || b.Weight > 0)
	}
}

// unhealthyGenerations increments UnhealthyGen of every backend whose
// flows start being diverted: it is not healthy, and the eligible set has a
// healthy member to divert them to, while in the previous State one of the
// two did not hold. So a backend that fails while another one is healthy
// loses its (non-persisting) entries at once, as before; one that fails
// while nothing is healthy keeps them ("always diverted to newly selected
// healthy backends, unless all backends are unhealthy": moving a flow from
// one unhealthy backend to another helps nobody), and loses them when a
// healthy backend appears, unless that backend is itself (recovered before
// anything could take its flows). Entries created in last resort on an
// unhealthy backend are diverted the same way once something is healthy.
// A backend seen for the first time starts at 0.
func (w *work) unhealthyGenerations() {
	if w.prev == nil {
		return
	}
	now, before := w.st.divertable(), w.prev.divertable()
	for i := range w.st.Backends {
		b := &w.st.Backends[i]
		pb := w.prevBackend(b.Name)
		if pb == nil {
			continue
		}
		if now && b.Health != HealthHealthy && !(before && pb.Health != HealthHealthy) {
			b.UnhealthyGen++
		}
	}
}

// divertable reports whether the eligible set has a healthy member, that
// is whether flows of unhealthy backends have somewhere better to go.
func (s *State) divertable() bool {
	for _, m := range s.Eligible {
		if b, ok := s.Backend(m.Name); ok && b.Health == HealthHealthy {
			return true
		}
	}
	return false
}

// departure returns when and why an admin departure started: the earlier
// of the drain and removal times given, clamped to now; now when none is
// given.
func departure(in *Backend, now time.Time) (time.Time, DrainReason) {
	at, reason := time.Time{}, DrainAdmin
	if in.Admin == AdminDrained && !in.DrainedAt.IsZero() {
		at = in.DrainedAt
	}
	if in.Removed {
		if at.IsZero() || (!in.RemovedAt.IsZero() && in.RemovedAt.Before(at)) {
			at, reason = in.RemovedAt, DrainRemoved
		}
		if in.Admin != AdminDrained {
			reason = DrainRemoved
		}
	}
	if at.IsZero() || at.After(now) {
		at = now
	}
	return at, reason
}

// depart starts a new drain generation at at: entries stamped before it
// are honoured until at+timeout. When older generations are still
// draining, the earlier deadline wins for all of them (never longer than
// any timeout promised); otherwise the older generations die now.
func (b *BackendState) depart(at time.Time, timeout time.Duration, reason DrainReason) {
	until := at.Add(timeout)
	if b.DrainUntil.After(at) {
		if until.After(b.DrainUntil) {
			until = b.DrainUntil
		}
	} else {
		b.DrainFloor = b.DrainGen
	}
	b.DrainGen++
	b.DrainUntil = until
	b.DrainReason = reason
	b.DepartedAt = at
}

// selection is a candidate eligible set.
type selection struct {
	tier      Tier
	weightSet WeightSet
	members   []*BackendState
	reported  bool // Maglev weights from the reported weights; false = equal
	reason    string
}

func (w *work) filter(keep func(b *BackendState) bool) []*BackendState {
	var out []*BackendState
	for i := range w.st.Backends {
		if b := &w.st.Backends[i]; keep(b) {
			out = append(out, b)
		}
	}
	return out
}

// preferred narrows a set of usable backends to those of preferred groups
// when there is at least one.
func (w *work) preferred(set []*BackendState) []*BackendState {
	var out []*BackendState
	for _, b := range set {
		if w.groups[b.Group].g.Preferred {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return set
	}
	return out
}

// desired picks the set docs/design.md#eligible-backends prescribes, without
// hysteresis.
func (w *work) desired() selection {
	weighted := w.p.WeightedMaglev
	if !w.failoverConfigured {
		usable := w.filter(func(b *BackendState) bool { return b.Usable })
		if len(usable) > 0 {
			s := selection{tier: TierPrimary, members: w.preferred(usable), reported: weighted, reason: fmt.Sprintf("%d usable backends", len(usable))}
			if weighted {
				s.weightSet = WeightSetHealthyWeighted
			}
			return s
		}
		if weighted {
			if set := w.filter(func(b *BackendState) bool { return b.InService && b.Weight > 0 }); len(set) > 0 {
				return selection{tier: TierLastResort, weightSet: WeightSetUnhealthyWeighted, members: set, reported: true, reason: "no healthy backend with weight > 0: unhealthy backends with weight > 0"}
			}
			if set := w.filter(func(b *BackendState) bool { return b.InService && b.Health == HealthHealthy }); len(set) > 0 {
				return selection{tier: TierLastResort, weightSet: WeightSetHealthyZero, members: set, reason: "all healthy backends report weight 0: equal weights"}
			}
		}
		if set := w.filter(func(b *BackendState) bool { return b.InService }); len(set) > 0 {
			s := selection{tier: TierLastResort, members: set, reason: "no usable backend: all backends in service"}
			if weighted {
				s.weightSet = WeightSetAll
			}
			return s
		}
		return selection{tier: TierEmpty, reason: "no backend in service"}
	}

	var all, usableP, usableF []*BackendState
	for i := range w.st.Backends {
		b := &w.st.Backends[i]
		switch {
		case b.Role == RolePrimary && !b.Removed:
			all = append(all, b)
			if b.Usable {
				usableP = append(usableP, b)
			}
		case b.Role == RoleFailover && b.Usable:
			usableF = append(usableF, b)
		}
	}
	ratio := w.p.FailoverRatio
	ok := len(usableP) > 0 && (ratio == 0 || float64(len(usableP)) >= ratio*float64(len(all)))
	count := fmt.Sprintf("usable primaries %d/%d", len(usableP), len(all))
	switch {
	case ok:
		return selection{tier: TierPrimary, members: w.preferred(usableP), reported: weighted, reason: fmt.Sprintf("%s, ratio %g", count, ratio)}
	case len(usableF) > 0:
		return selection{tier: TierFailover, members: w.preferred(usableF), reported: weighted, reason: fmt.Sprintf("%s below ratio %g: %d usable failover backends", count, ratio, len(usableF))}
	case len(usableP) > 0:
		return selection{tier: TierPrimaryFallback, members: w.preferred(usableP), reported: weighted, reason: fmt.Sprintf("%s below ratio %g and no usable failover backend", count, ratio)}
	case w.p.DropTrafficIfUnhealthy:
		return selection{tier: TierEmpty, reason: "nothing usable and drop_traffic_if_unhealthy: new connections dropped"}
	}
	if weighted {
		if set := w.filter(func(b *BackendState) bool { return b.Role == RolePrimary && b.InService && b.Weight > 0 }); len(set) > 0 {
			return selection{tier: TierLastResort, members: set, reported: true, reason: "nothing usable: primaries with weight > 0"}
		}
	}
	if set := w.filter(func(b *BackendState) bool { return b.Role == RolePrimary && b.InService }); len(set) > 0 {
		return selection{tier: TierLastResort, members: set, reason: "nothing usable: all primaries in service, equal weights"}
	}
	return selection{tier: TierEmpty, reason: "nothing usable and no primary in service"}
}

// selectEligible applies the failback hysteresis to desired(), fills
// State.Eligible, and handles a primary/failover switch.
func (w *work) selectEligible() {
	sel := w.desired()
	prevTier := TierNone
	if w.prev != nil {
		prevTier = w.prev.Tier
	}
	if prevTier == TierFailover && sel.tier == TierPrimary && w.p.FailbackDelay > 0 {
		usableF := w.filter(func(b *BackendState) bool { return b.Role == RoleFailover && b.Usable })
		if len(usableF) > 0 {
			since := w.prev.FailbackPendingSince
			if since.IsZero() {
				since = w.now
			}
			if w.now.Sub(since) < w.p.FailbackDelay {
				w.st.FailbackPendingSince = since
				sel = selection{tier: TierFailover, members: w.preferred(usableF), reported: w.p.WeightedMaglev,
					reason: fmt.Sprintf("failback pending since %s (delay %v): %s", since.UTC().Format(time.RFC3339), w.p.FailbackDelay, sel.reason)}
			}
		}
	}

	w.st.Tier, w.st.WeightSet, w.st.Reason = sel.tier, sel.weightSet, sel.reason
	w.st.Eligible = w.members(sel.members, sel.reported)
	for _, b := range sel.members {
		b.Eligible = true
	}

	if w.prev != nil {
		w.st.FlushGen = w.prev.FlushGen
		w.st.lastSide, w.st.hasSide = w.prev.lastSide, w.prev.hasSide
	}
	if sel.tier != prevTier {
		ev := Event{Kind: EventTierSwitch, At: w.now, From: prevTier, To: sel.tier, Reason: sel.reason}
		if sel.tier != TierEmpty && w.st.hasSide && sel.tier.side() != w.st.lastSide {
			ev.Switched = true
		}
		w.st.Events = append(w.st.Events, ev)
		if ev.Switched {
			w.switchSides()
		}
	}
	if sel.tier != TierEmpty {
		w.st.lastSide, w.st.hasSide = sel.tier.side(), true
	}
}

// switchSides applies "Draining on failover" at a primary/failover switch:
// flush the rule, or bound the entries of every backend outside the new
// eligible set (not only those that were in the old one: the contract gives
// all existing connections at most failover_drain_timeout,
// docs/design.md#draining-on-failover) that is not already draining for an
// admin reason.
func (w *work) switchSides() {
	if !w.p.ConnectionDrainOnFailover {
		w.st.FlushGen++
		return
	}
	for i := range w.st.Backends {
		b := &w.st.Backends[i]
		if !b.Eligible && !b.admin {
			b.depart(w.now, w.p.FailoverDrainTimeout, DrainFailover)
		}
	}
}

// members turns a selected set into Members with Maglev weights: the
// reported weight (or 1 when equal weights are prescribed) times the
// group's capacity scaler in thousandths, reduced by the GCD of the set.
func (w *work) members(set []*BackendState, reported bool) []Member {
	if len(set) == 0 {
		return nil
	}
	out := make([]Member, len(set))
	for i, b := range set {
		base := uint32(1)
		if reported {
			base = b.Weight
		}
		raw := base * w.groups[b.Group].scalerMilli
		out[i] = Member{Name: b.Name, ID: b.ID, Group: b.Group, Zone: b.Zone, Usable: b.Usable, Weight: raw, raw: raw}
	}
	reduceWeights(out)
	return out
}

// reduceWeights divides the weights by their GCD, so equal weights become 1
// and the table builder sees the smallest integers with the same shares.
func reduceWeights(ms []Member) {
	var g uint32
	for _, m := range ms {
		g = gcd(g, m.Weight)
	}
	if g <= 1 {
		return
	}
	for i := range ms {
		ms[i].Weight /= g
	}
}

func gcd(a, b uint32) uint32 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func (w *work) finish() {
	st := w.st
	var next time.Time
	later := func(t time.Time) {
		if t.After(w.now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !st.FailbackPendingSince.IsZero() {
		later(st.FailbackPendingSince.Add(w.p.FailbackDelay))
	}
	for i := range st.Groups {
		if g := &st.Groups[i]; g.AutoDrained && !g.RecoverSince.IsZero() {
			later(g.RecoverSince.Add(AutoDrainHold))
		}
	}
	for i := range st.Backends {
		later(st.Backends[i].DrainUntil)
	}
	st.NextCompute = next

	var hist []Event
	if w.prev != nil {
		hist = w.prev.History
	}
	all := append(slices.Clone(hist), st.Events...)
	if len(all) > MaxHistory {
		all = slices.Clone(all[len(all)-MaxHistory:])
	}
	st.History = all
}
