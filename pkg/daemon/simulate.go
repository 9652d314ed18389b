package daemon

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/packet"
)

// SimChange is one proposed change for Simulate.
type SimChange struct {
	Kind   SimKind
	Addr   netip.Addr
	Weight int         // SimWeight: 0..MaxWeight
	Role   config.Role // SimRole
}

// SimKind is what a SimChange does to a backend.
type SimKind uint8

const (
	SimRemove SimKind = iota // take the backend out of the rule
	SimAdd                   // add it to the rule's first group of the primary role
	SimWeight                // give it a weight (WEIGHTED_MAGLEV rules)
	SimRole                  // mark it primary or failover
)

func (k SimKind) String() string {
	return [...]string{"remove", "add", "weight", "role"}[min(int(k), 3)]
}

// SimOptions configure Simulate.
type SimOptions struct {
	Rule    string // "" = every rule the changes concern
	Changes []SimChange
	Flows   int    // random flows to place before and after (0: the table comparison only)
	Seed    uint64 // of the random flows
}

// SimRule is the simulated effect on one rule.
type SimRule struct {
	Rule      string
	TableSize uint32 // after the change
	// TableSizeBefore differs from TableSize when the change moves the
	// rule's backend count across a step of its automatic size: then
	// every new flow is placed anew.
	TableSizeBefore       uint32
	TierBefore, TierAfter string
	// Moved is the share of all new flows whose backend changes
	// (changed slots / M); SurvivorMoved the share that moves away from
	// backends that stay (the disruption the change inflicts on them).
	Moved, SurvivorMoved float64
	Flows, FlowsMoved    int
	Backends             []SimBackend // sorted by address
}

// SimBackend is one backend's part. Shares are of all the rule's new
// flows (Maglev slots); MovedOwn is the share of the backend's own flows
// that leave it.
type SimBackend struct {
	Address          string
	Before, After    float64
	MovedAway        float64 // flows that leave it / all flows
	MovedOwn         float64 // flows that leave it / its flows
	Gained           float64
	InBefore         bool
	InAfter          bool
	FlowsBefore      int // sampled flows on it before the change
	FlowsMoved       int // of which placed elsewhere after
	ChangedByRequest bool
}

// Simulate computes, without a running daemon, how new flows would move
// if changes were made to cfg (with the overlay st applied). Every backend
// counts as healthy with its static or overlay weight (1 when none), as if
// every probe passed; drained backends stay out; roles and failover
// ratios apply as configured. Only the eligible sets and Maglev tables
// are compared: tracked connections keep their backend anyway, except
// those of a removed or drained backend once its draining timeout ends.
func Simulate(cfg *config.Config, st *config.State, opts SimOptions) ([]SimRule, error) {
	if len(opts.Changes) == 0 {
		return nil, fmt.Errorf("simulate: no change given")
	}
	view := config.Apply(cfg, st)
	var out []SimRule
	for i := range view.Rules {
		rv := &view.Rules[i]
		if opts.Rule != "" && rv.Rule.Name != opts.Rule {
			continue
		}
		if opts.Rule == "" && !concerns(rv, opts.Changes, len(view.Rules)) {
			continue
		}
		sr, err := simulateRule(cfg, rv, opts)
		if err != nil {
			return nil, fmt.Errorf("simulate rule %s: %w", rv.Rule.Name, err)
		}
		out = append(out, sr)
	}
	if len(out) == 0 {
		if opts.Rule != "" {
			return nil, fmt.Errorf("simulate: no rule %q", opts.Rule)
		}
		return nil, fmt.Errorf("simulate: no rule has the backends named (give --rule)")
	}
	return out, nil
}

// concerns reports whether a change names a backend of the rule (an add
// concerns the only rule, or needs --rule).
func concerns(rv *config.RuleView, cs []SimChange, rules int) bool {
	for _, c := range cs {
		if c.Kind == SimAdd {
			if rules == 1 {
				return true
			}
			continue
		}
		for _, b := range rv.Backends {
			if b.Addr == c.Addr.Unmap() {
				return true
			}
		}
	}
	return false
}

// simInput is a rule's eligible-set input with every backend healthy.
type simInput struct {
	groups   []failover.Group
	backends []failover.Backend
}

func baseInput(rv *config.RuleView) simInput {
	groups, bs := failoverInput(rv, func(_ *config.BackendView, fb *failover.Backend) {
		fb.Health, fb.Weight, fb.WeightState = failover.HealthHealthy, 1, failover.WeightOK
	})
	return simInput{groups: groups, backends: bs}
}

func (in *simInput) apply(rv *config.RuleView, c SimChange) error {
	name := c.Addr.Unmap().String()
	at := slices.IndexFunc(in.backends, func(b failover.Backend) bool { return b.Name == name })
	if c.Kind != SimAdd && at < 0 {
		return fmt.Errorf("%s %s: no such backend in the rule", c.Kind, name)
	}
	switch c.Kind {
	case SimRemove:
		in.backends = slices.Delete(in.backends, at, at+1)
	case SimAdd:
		if at >= 0 {
			return fmt.Errorf("add %s: already a backend of the rule", name)
		}
		g := ""
		for _, cg := range rv.Rule.Groups {
			if cg.Role == config.RolePrimary {
				g = cg.Name
				break
			}
		}
		if g == "" {
			return fmt.Errorf("add %s: the rule has no primary group", name)
		}
		in.backends = append(in.backends, failover.Backend{Name: name, Group: g, Health: failover.HealthHealthy, Weight: 1, WeightState: failover.WeightOK})
	case SimWeight:
		if rv.Rule.LocalityLBPolicy != config.WeightedMaglev {
			return fmt.Errorf("weight %s: the rule uses %s; weights need WEIGHTED_MAGLEV", name, rv.Rule.LocalityLBPolicy)
		}
		if c.Weight < 0 || c.Weight > config.MaxWeight {
			return fmt.Errorf("weight %s: %d is outside [0, %d]", name, c.Weight, config.MaxWeight)
		}
		in.backends[at].Weight = uint32(c.Weight)
	case SimRole:
		b := &in.backends[at]
		g := b.Group
		base := g
		for _, cg := range rv.Rule.Groups {
			if cg.Name == g || g == cg.Name+"~primary" || g == cg.Name+"~failover" {
				base = cg.Name
				if cg.Role == c.Role {
					g = cg.Name
				} else {
					g = cg.Name + "~" + c.Role.String()
				}
				break
			}
		}
		if !slices.ContainsFunc(in.groups, func(x failover.Group) bool { return x.Name == g }) {
			var src failover.Group
			for _, x := range in.groups {
				if x.Name == base {
					src = x
				}
			}
			src.Name, src.Role = g, roles.of(c.Role)
			in.groups = append(in.groups, src)
		}
		b.Group = g
	}
	return nil
}

func simulateRule(cfg *config.Config, rv *config.RuleView, opts SimOptions) (SimRule, error) {
	r := rv.Rule
	before := baseInput(rv)
	after := baseInput(rv)
	after.groups = slices.Clone(after.groups)
	touched := map[string]bool{}
	for _, c := range opts.Changes {
		if opts.Rule == "" && c.Kind != SimAdd && !slices.ContainsFunc(rv.Backends, func(b config.BackendView) bool { return b.Addr == c.Addr.Unmap() }) {
			continue // a change for another rule
		}
		if err := after.apply(rv, c); err != nil {
			return SimRule{}, err
		}
		touched[c.Addr.Unmap().String()] = true
	}
	// One ID per name over both sets, so the tables' IDs name backends.
	var names []string
	for _, in := range []*simInput{&before, &after} {
		for _, b := range in.backends {
			if !slices.Contains(names, b.Name) {
				names = append(names, b.Name)
			}
		}
	}
	slices.Sort(names)
	now := time.Unix(0, 0)
	build := func(in *simInput) (*hash.MaglevTable, string, error) {
		for i := range in.backends {
			in.backends[i].ID = uint32(slices.Index(names, in.backends[i].Name))
		}
		s, err := failover.Compute(policyOf(r), in.groups, in.backends, nil, now)
		if err != nil {
			return nil, "", err
		}
		size := uint32(cfg.MaglevTableSize)
		if size == 0 { // each rule's follows its configured backends (publish.go tableSize)
			if size, err = hash.TableSizeFor(len(in.backends)); err != nil {
				return nil, "", err
			}
		}
		t, err := hash.Build(failover.MaglevBackends(s.Eligible), size, cfg.HashSeed)
		return t, s.Tier.String(), err
	}
	tb, tierB, err := build(&before)
	if err != nil {
		return SimRule{}, fmt.Errorf("before: %w", err)
	}
	ta, tierA, err := build(&after)
	if err != nil {
		return SimRule{}, fmt.Errorf("after: %w", err)
	}
	sr := SimRule{Rule: r.Name, TableSize: ta.Size(), TableSizeBefore: tb.Size(), TierBefore: tierB, TierAfter: tierA}
	shares := compareTables(tb, ta, names)
	row := map[string]int{}
	for _, bd := range shares.backends {
		sr.Moved += bd.lost
		if bd.inAfter {
			sr.SurvivorMoved += bd.lost
		}
		row[bd.name] = len(sr.Backends)
		sb := SimBackend{
			Address: bd.name, Before: bd.before, After: bd.after,
			MovedAway: bd.lost, Gained: bd.gained,
			InBefore: bd.inBefore, InAfter: bd.inAfter, ChangedByRequest: touched[bd.name],
		}
		if bd.before > 0 {
			sb.MovedOwn = bd.lost / bd.before
		}
		sr.Backends = append(sr.Backends, sb)
	}
	// Backends in neither table (drained, failover while primaries
	// serve) hold no flows before or after: listed for completeness.
	for _, n := range names {
		if _, ok := row[n]; !ok {
			row[n] = len(sr.Backends)
			sr.Backends = append(sr.Backends, SimBackend{Address: n, ChangedByRequest: touched[n]})
		}
	}
	slices.SortFunc(sr.Backends, func(a, b SimBackend) int { return compareAddr(a.Address, b.Address) })
	for i := range sr.Backends {
		row[sr.Backends[i].Address] = i
	}
	if opts.Flows > 0 {
		sampleFlows(&sr, r, cfg.HashSeed, tb, ta, names, row, opts)
	}
	return sr, nil
}

// tableShares is how two tables split the hash space, per backend.
type tableShares struct {
	backends []shareRow // sorted by name
}

type shareRow struct {
	name              string
	before, after     float64 // shares of the hash space
	lost, gained      float64 // held before and not after, and the other way
	inBefore, inAfter bool    // in the table's set
}

// compareTables compares two tables whose IDs index names, of any sizes:
// the hash space, cut at both tables' slot boundaries (slot s of a table
// of M slots holds the hashes h with ⌊h·M/2⁶⁴⌋ = s), is walked piece by
// piece, each piece owned by one backend in each table. Of equal sizes
// this is hash.Delta in shares; of different sizes (a change that moves
// a rule's backend count across a TableSizeFor step) it says exactly how
// much of the hash space changes hands.
func compareTables(tb, ta *hash.MaglevTable, names []string) tableShares {
	type units struct{ before, after, lost, gained uint64 }
	rows := map[string]*shareRow{}
	counts := map[string]*units{}
	row := func(n string) *shareRow {
		if rows[n] == nil {
			rows[n], counts[n] = &shareRow{name: n}, &units{}
		}
		return rows[n]
	}
	unitsOf := func(n string) *units {
		row(n)
		return counts[n]
	}
	for _, b := range tb.Backends() {
		row(b.Name).inBefore = true
	}
	for _, b := range ta.Backends() {
		row(b.Name).inAfter = true
	}
	mb, ma := uint64(tb.Size()), uint64(ta.Size())
	owner := func(t *hash.MaglevTable, s uint64) *units {
		if id, ok := t.SlotID(uint32(s)); ok {
			return unitsOf(names[id])
		}
		return nil
	}
	// Positions and shares count in units of 1/(mb·ma) of the hash space
	// (at most 2⁴⁸), exactly; they become fractions at the end.
	var i, j, at uint64
	for i < mb && j < ma {
		endB, endA := (i+1)*ma, (j+1)*mb
		end := min(endB, endA)
		piece := end - at
		ob, oa := owner(tb, i), owner(ta, j)
		if ob != nil {
			ob.before += piece
		}
		if oa != nil {
			oa.after += piece
		}
		if ob != oa {
			if ob != nil {
				ob.lost += piece
			}
			if oa != nil {
				oa.gained += piece
			}
		}
		at = end
		if end == endB {
			i++
		}
		if end == endA {
			j++
		}
	}
	var out tableShares
	all := float64(mb * ma)
	for n, r := range rows {
		c := counts[n]
		r.before, r.after = float64(c.before)/all, float64(c.after)/all
		r.lost, r.gained = float64(c.lost)/all, float64(c.gained)/all
		out.backends = append(out.backends, *r)
	}
	slices.SortFunc(out.backends, func(a, b shareRow) int { return strings.Compare(a.name, b.name) })
	return out
}

func compareAddr(a, b string) int {
	x, err1 := netip.ParseAddr(a)
	y, err2 := netip.ParseAddr(b)
	if err1 != nil || err2 != nil {
		return 0
	}
	return x.Compare(y)
}

// sampleFlows places opts.Flows random client flows (from 198.18.0.0/15,
// the benchmarking range, to the rule's VIP and first port) in both
// tables, with the rule's session affinity.
func sampleFlows(sr *SimRule, r *config.Rule, seed uint64, tb, ta *hash.MaglevTable, names []string, row map[string]int, opts SimOptions) {
	rng := rand.New(rand.NewPCG(opts.Seed, 0x51a1))
	proto := ipProtocols.of(r.Protocol)
	dport := uint16(80)
	if !r.Ports.All && len(r.Ports.Ranges) > 0 {
		dport = r.Ports.Ranges[0].First
	}
	var m packet.Meta
	m.Dst, m.Proto, m.DstPort = r.VIP.As16(), proto, dport
	v6 := r.VIP.Is6() && !r.VIP.Is4In6()
	aff := affinities.of(r.SessionAffinity)
	for range opts.Flows {
		if v6 {
			var a [16]byte
			a[0], a[1] = 0xfd, 0x00
			for i := 8; i < 16; i++ {
				a[i] = byte(rng.Uint32())
			}
			m.Src = a
		} else {
			x := rng.Uint32()
			m.Src = netip.AddrFrom4([4]byte{198, 18 | byte(x>>16)&1, byte(x >> 8), byte(x)}).As16()
		}
		m.SrcPort = uint16(1024 + rng.IntN(64512))
		h := hash.SelectionHash(&m, aff, seed)
		idB, okB := tb.Lookup(h)
		idA, okA := ta.Lookup(h)
		if !okB {
			continue
		}
		sr.Flows++
		b := &sr.Backends[row[names[idB]]]
		b.FlowsBefore++
		if !okA || idA != idB {
			b.FlowsMoved++
			sr.FlowsMoved++
		}
	}
}
