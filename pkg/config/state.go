package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"
)

// State is the CLI overlay: per-backend changes made with `xlb backend
// mark|drain|undrain|weight`, kept in state_file, applied on top of the rule
// files by Apply. The operator's files are never written.
//
// A State is not safe for concurrent use: the daemon's control goroutine
// owns it, changes it, Saves it and only then publishes the new view, so a
// change the CLI saw acknowledged survives a crash.
type State struct {
	Overrides []Override     // sorted by rule, then backend
	Appliance ApplianceState // xlb appliance drain (appliance_state.go)

	file  string     // display name of the file it was loaded from, for issues
	lines *lazyLines // key lines of that file
	index []int      // index[i]: position in the loaded file of Overrides[i], -1 if new
}

// Override is everything the CLI changed about one backend of one rule,
// or of one backend service and so of all its rules (Rule then holds the
// service's name: OverrideKey).
// A field applies only when its Set flag is true; an Override with no flag
// set does not exist (it is removed).
type Override struct {
	Rule    string
	Backend netip.Addr

	RoleSet bool
	Role    Role // xlb backend mark --role

	Drained   bool      // xlb backend drain
	DrainedAt time.Time // when the drain started (entries are honoured for connection_draining_timeout from then)

	WeightSet bool
	Weight    uint16 // xlb backend weight: replaces the health-check (and static) weight
}

func (o *Override) empty() bool { return !o.RoleSet && !o.Drained && !o.WeightSet }

// Source says where an effective value comes from.
type Source uint8

const (
	SourceConfig Source = iota // the rule files (or their defaults)
	SourceCLI                  // the state overlay
)

func (s Source) String() string { return enumString([]string{"config", "cli"}, s) }

// stateVersion is the format of state_file; a file of another version is
// refused rather than misread.
const stateVersion = 1

// LoadState reads the overlay at path. A missing file is an empty State.
// Errors name file, line and key like Load's; a bad state file stops the
// daemon rather than silently dropping the operator's drains. Its error is
// a *StateFileError (which unwraps to *Error) saying what removing the
// file would drop.
func LoadState(path string) (*State, error) {
	st := &State{file: path}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load state: %w", err)
	}
	is := &issues{}
	f := &srcFile{name: path, is: is}
	if root := decodeFile(f, data); root != nil {
		st.lines = f.lines
		readState(root, st)
	}
	if _, err := is.result(); err != nil {
		if cerr, ok := err.(*Error); ok {
			return nil, &StateFileError{Path: path, Err: cerr, Loss: stateLoss(path)}
		}
		return nil, err
	}
	return st, nil
}

func readState(root *table, st *State) {
	var v int64
	if !root.has("version") {
		root.errorf("version", "missing")
	}
	root.integer("version", stateVersion, stateVersion, &v)
	seen := map[[2]string]int{}
	for i, t := range root.tables("override") {
		var o Override
		var addr string
		t.str("rule", &o.Rule)
		if t.str("backend", &addr) {
			a, why := parseAddr(addr)
			if why != "" {
				t.errorf("backend", "%q %s", addr, why)
			}
			o.Backend = a
		}
		for _, k := range []string{"rule", "backend"} {
			if !t.has(k) {
				t.errorf(k, "missing")
			}
		}
		if t.has("role") {
			o.RoleSet = enum(t, "role", roleNames, &o.Role)
		}
		t.boolean("drained", &o.Drained)
		if v, ok := t.get("drained_at"); ok {
			if ts, isTime := v.(time.Time); isTime {
				o.DrainedAt = ts
			} else {
				t.wrongType("drained_at", "a date-time", v)
			}
		}
		var w int64
		if t.integer("weight", 0, MaxWeight, &w) {
			o.Weight, o.WeightSet = uint16(w), true
		}
		t.done()
		k := [2]string{o.Rule, o.Backend.String()}
		if prev, dup := seen[k]; dup {
			t.f.errorf(t.path, "a second override for rule %q backend %s (first: override[%d])", o.Rule, o.Backend, prev)
			continue
		}
		seen[k] = i
		if !o.empty() {
			st.Overrides = append(st.Overrides, o)
			st.index = append(st.index, i)
		}
	}
	readApplianceState(root, st)
	root.done()
	st.sort()
}

func (st *State) sort() {
	idx := make([]int, len(st.Overrides))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		oa, ob := &st.Overrides[a], &st.Overrides[b]
		return cmp.Or(strings.Compare(oa.Rule, ob.Rule), oa.Backend.Compare(ob.Backend))
	})
	ovs := make([]Override, len(idx))
	pos := make([]int, len(idx))
	for i, j := range idx {
		ovs[i] = st.Overrides[j]
		pos[i] = -1
		if j < len(st.index) {
			pos[i] = st.index[j]
		}
	}
	st.Overrides, st.index = ovs, pos
}

// find returns the override of (rule, backend), or nil.
func (st *State) find(rule string, backend netip.Addr) *Override {
	backend = backend.Unmap()
	for i := range st.Overrides {
		if st.Overrides[i].Rule == rule && st.Overrides[i].Backend == backend {
			return &st.Overrides[i]
		}
	}
	return nil
}

// edit returns the override of (rule, backend), creating it.
func (st *State) edit(rule string, backend netip.Addr) *Override {
	if o := st.find(rule, backend); o != nil {
		return o
	}
	st.Overrides = append(st.Overrides, Override{Rule: rule, Backend: backend.Unmap()})
	st.index = append(st.index, -1)
	st.sort()
	return st.find(rule, backend)
}

// prune drops overrides with nothing left in them.
func (st *State) prune() {
	keep := st.Overrides[:0]
	idx := st.index[:0]
	for i, o := range st.Overrides {
		if !o.empty() {
			keep = append(keep, o)
			idx = append(idx, st.index[i])
		}
	}
	st.Overrides, st.index = keep, idx
}

// OverrideKey is the name the overlay keeps name's overrides under, name
// being a rule or a backend service: the backend service
// (docs/design.md#backend-services; a rule with its own backends is its
// own), so that every rule of a service follows one override.
func OverrideKey(cfg *Config, name string) string {
	if r := cfg.Rule(name); r != nil {
		return r.ServiceName()
	}
	return name
}

// target finds the backend in the rules of name's service, or explains
// why it cannot: the override key, the rules that have the backend and
// its group in the first of them.
func target(cfg *Config, name string, backend netip.Addr) (string, []*Rule, *Group, error) {
	key := OverrideKey(cfg, name)
	all := cfg.RulesOf(key)
	if len(all) == 0 && len(cfg.Services) == 0 {
		return "", nil, nil, fmt.Errorf("no rule %q", name)
	} else if len(all) == 0 {
		return "", nil, nil, fmt.Errorf("no rule or backend service %q", name)
	}
	backend = backend.Unmap()
	var rules []*Rule
	var group *Group
	for _, r := range all {
		for gi := range r.Groups {
			for _, b := range r.Groups[gi].Backends {
				if b.Addr == backend {
					if group == nil {
						group = &r.Groups[gi]
					}
					rules = append(rules, r)
				}
			}
		}
	}
	if group == nil {
		if key != name || all[0].Name != name {
			return "", nil, nil, fmt.Errorf("backend service %q has no backend %s", key, backend)
		}
		return "", nil, nil, fmt.Errorf("rule %q has no backend %s", name, backend)
	}
	return key, rules, group, nil
}

// Mark overrides the role of a backend (`xlb backend mark --rule R --role
// failover ADDR`), in every rule of R's backend service. Marking a backend
// with its group's own role removes the role override. It refuses a
// change that would leave a rule with failover backends but no primary
// one.
func (st *State) Mark(cfg *Config, rule string, backend netip.Addr, role Role) error {
	key, rules, g, err := target(cfg, rule, backend)
	if err != nil {
		return fmt.Errorf("mark backend: %w", err)
	}
	for _, r := range rules {
		primaries, failovers := 0, 0
		for _, gb := range r.Backends() {
			eff := gb.Group.Role
			if gb.Addr == backend.Unmap() {
				eff = role
			} else if o := st.find(key, gb.Addr); o != nil && o.RoleSet {
				eff = o.Role
			}
			if eff == RolePrimary {
				primaries++
			} else {
				failovers++
			}
		}
		if primaries == 0 && failovers > 0 {
			return fmt.Errorf("mark backend: rule %q would have no primary backend", r.Name)
		}
	}
	o := st.edit(key, backend)
	o.RoleSet, o.Role = role != g.Role, role
	st.prune()
	return nil
}

// Drain takes a backend out of the eligible set (`xlb backend drain`); its
// tracked connections are honoured for the rule's
// connection_draining_timeout from now. Draining a drained backend keeps
// the first start time.
func (st *State) Drain(cfg *Config, rule string, backend netip.Addr, now time.Time) error {
	key, _, _, err := target(cfg, rule, backend)
	if err != nil {
		return fmt.Errorf("drain backend: %w", err)
	}
	o := st.edit(key, backend)
	if !o.Drained {
		o.Drained, o.DrainedAt = true, now.UTC().Truncate(time.Second)
	}
	return nil
}

// Undrain ends a drain (`xlb backend undrain`). It works on stale overrides
// too, and reports whether the backend was drained; a backend that is
// neither in cfg nor in the overlay is an error (a typo must not pass for
// "was not drained").
func (st *State) Undrain(cfg *Config, rule string, backend netip.Addr) (bool, error) {
	o := st.find(OverrideKey(cfg, rule), backend)
	if o == nil {
		if _, _, _, err := target(cfg, rule, backend); err != nil {
			return false, fmt.Errorf("undrain backend: %w", err)
		}
	}
	if o == nil || !o.Drained {
		return false, nil
	}
	o.Drained, o.DrainedAt = false, time.Time{}
	st.prune()
	return true, nil
}

// SetWeight overrides a backend's weight (`xlb backend weight`), 0..1000,
// on a WEIGHTED_MAGLEV rule; the weight header and any static weight are
// then ignored for it.
func (st *State) SetWeight(cfg *Config, rule string, backend netip.Addr, weight int) error {
	key, rules, _, err := target(cfg, rule, backend)
	if err != nil {
		return fmt.Errorf("set weight: %w", err)
	}
	if r := rules[0]; r.LocalityLBPolicy != WeightedMaglev {
		return fmt.Errorf("set weight: rule %q uses %s; weights need WEIGHTED_MAGLEV", rule, r.LocalityLBPolicy)
	}
	if weight < 0 || weight > MaxWeight {
		return fmt.Errorf("set weight: %d is outside [0, %d]", weight, MaxWeight)
	}
	o := st.edit(key, backend)
	o.Weight, o.WeightSet = uint16(weight), true
	return nil
}

// Reset removes every override of a backend (`xlb backend reset`), stale
// or not, and reports whether there was one; a backend that is neither in
// cfg nor in the overlay is an error.
func (st *State) Reset(cfg *Config, rule string, backend netip.Addr) (bool, error) {
	o := st.find(OverrideKey(cfg, rule), backend)
	if o == nil {
		if _, _, _, err := target(cfg, rule, backend); err != nil {
			return false, fmt.Errorf("reset backend: %w", err)
		}
		return false, nil
	}
	*o = Override{}
	st.prune()
	return true, nil
}

// issue locates override i in the loaded state file (line 0 for an
// override made since).
func (st *State) issue(i int, key, msg string) Issue {
	path := "override"
	line := 0
	if i < len(st.index) && st.index[i] >= 0 {
		path = joinIndex("override", st.index[i])
		line = st.lines.line(path)
	}
	if key != "" {
		path = joinKey(path, key)
		line = max(line, st.lines.line(path))
	}
	return Issue{File: st.file, Line: line, Key: path, Message: msg}
}
