package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// State is the CLI overlay: per-backend changes made with `xlb backend
// mark|drain|undrain|weight`, kept in state_file, applied on top of the rule
// files by Apply. The operator's files are never written.
//
// A State is not safe for concurrent use: the daemon's control goroutine
// owns it, changes it, Saves it and only then publishes the new view, so a
// change the CLI saw acknowledged survives a crash.
type State struct {
	Overrides []Override // sorted by rule, then backend

	file  string   // display name of the file it was loaded from, for issues
	lines keyLines // key lines of that file
	index []int    // index[i]: position in the loaded file of Overrides[i], -1 if new
}

// Override is everything the CLI changed about one backend of one rule.
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
// daemon rather than silently dropping the operator's drains.
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

// target finds the backend's group in cfg, or explains why it cannot.
func target(cfg *Config, rule string, backend netip.Addr) (*Rule, *Group, error) {
	r := cfg.Rule(rule)
	if r == nil {
		return nil, nil, fmt.Errorf("no rule %q", rule)
	}
	backend = backend.Unmap()
	for gi := range r.Groups {
		for _, b := range r.Groups[gi].Backends {
			if b.Addr == backend {
				return r, &r.Groups[gi], nil
			}
		}
	}
	return nil, nil, fmt.Errorf("rule %q has no backend %s", rule, backend)
}

// Mark overrides the role of a backend (`xlb backend mark --rule R --role
// failover ADDR`). Marking a backend with its group's own role removes the
// role override. It refuses a change that would leave the rule with
// failover backends but no primary one.
func (st *State) Mark(cfg *Config, rule string, backend netip.Addr, role Role) error {
	r, g, err := target(cfg, rule, backend)
	if err != nil {
		return fmt.Errorf("mark backend: %w", err)
	}
	primaries, failovers := 0, 0
	for _, gb := range r.Backends() {
		eff := gb.Group.Role
		if gb.Addr == backend.Unmap() {
			eff = role
		} else if o := st.find(rule, gb.Addr); o != nil && o.RoleSet {
			eff = o.Role
		}
		if eff == RolePrimary {
			primaries++
		} else {
			failovers++
		}
	}
	if primaries == 0 && failovers > 0 {
		return fmt.Errorf("mark backend: rule %q would have no primary backend", rule)
	}
	o := st.edit(rule, backend)
	o.RoleSet, o.Role = role != g.Role, role
	st.prune()
	return nil
}

// Drain takes a backend out of the eligible set (`xlb backend drain`); its
// tracked connections are honoured for the rule's
// connection_draining_timeout from now. Draining a drained backend keeps
// the first start time.
func (st *State) Drain(cfg *Config, rule string, backend netip.Addr, now time.Time) error {
	if _, _, err := target(cfg, rule, backend); err != nil {
		return fmt.Errorf("drain backend: %w", err)
	}
	o := st.edit(rule, backend)
	if !o.Drained {
		o.Drained, o.DrainedAt = true, now.UTC().Truncate(time.Second)
	}
	return nil
}

// Undrain ends a drain (`xlb backend undrain`). It works on stale overrides
// too, and reports whether the backend was drained.
func (st *State) Undrain(rule string, backend netip.Addr) bool {
	o := st.find(rule, backend)
	if o == nil || !o.Drained {
		return false
	}
	o.Drained, o.DrainedAt = false, time.Time{}
	st.prune()
	return true
}

// SetWeight overrides a backend's weight (`xlb backend weight`), 0..1000,
// on a WEIGHTED_MAGLEV rule; the weight header and any static weight are
// then ignored for it.
func (st *State) SetWeight(cfg *Config, rule string, backend netip.Addr, weight int) error {
	r, _, err := target(cfg, rule, backend)
	if err != nil {
		return fmt.Errorf("set weight: %w", err)
	}
	if r.LocalityLBPolicy != WeightedMaglev {
		return fmt.Errorf("set weight: rule %q uses %s; weights need WEIGHTED_MAGLEV", rule, r.LocalityLBPolicy)
	}
	if weight < 0 || weight > MaxWeight {
		return fmt.Errorf("set weight: %d is outside [0, %d]", weight, MaxWeight)
	}
	o := st.edit(rule, backend)
	o.Weight, o.WeightSet = uint16(weight), true
	return nil
}

// Reset removes every override of a backend (`xlb backend reset`), stale
// or not, and reports whether there was one.
func (st *State) Reset(rule string, backend netip.Addr) bool {
	o := st.find(rule, backend)
	if o == nil {
		return false
	}
	*o = Override{}
	st.prune()
	return true
}

// stateFile is the on-disk form.
type stateFile struct {
	Version  int            `toml:"version"`
	Override []overrideFile `toml:"override"`
}

type overrideFile struct {
	Rule      string     `toml:"rule"`
	Backend   string     `toml:"backend"`
	Role      string     `toml:"role,omitempty"`
	Drained   bool       `toml:"drained,omitempty"`
	DrainedAt *time.Time `toml:"drained_at,omitempty"`
	Weight    *uint16    `toml:"weight,omitempty"`
}

const stateHeader = `# xlb state overlay: changes made with xlb backend mark|drain|undrain|weight.
# Written by the xlb daemon (atomically) and applied on top of the rule
# files, which xlb never rewrites. Do not edit while xlb runs;
# "xlb backend reset --rule R ADDR" removes an override.
`

// Marshal returns the state file's text.
func (st *State) Marshal() ([]byte, error) {
	sf := stateFile{Version: stateVersion}
	for _, o := range st.Overrides {
		of := overrideFile{Rule: o.Rule, Backend: o.Backend.String(), Drained: o.Drained}
		if o.RoleSet {
			of.Role = o.Role.String()
		}
		if o.Drained && !o.DrainedAt.IsZero() {
			t := o.DrainedAt.UTC()
			of.DrainedAt = &t
		}
		if o.WeightSet {
			w := o.Weight
			of.Weight = &w
		}
		sf.Override = append(sf.Override, of)
	}
	var b bytes.Buffer
	b.WriteString(stateHeader)
	if err := toml.NewEncoder(&b).Encode(sf); err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	return b.Bytes(), nil
}

// Save writes the state to path atomically: a temporary file in the same
// directory, fsync, rename over path, fsync of the directory. A reader (or
// a restart after a crash) sees the old file or the new one, never a mix.
// The directory is created when missing.
func (st *State) Save(path string) error {
	data, err := st.Marshal()
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, data, 0o644); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// saveHook lets tests fail a save at a given stage ("write", "sync",
// "rename") to simulate a crash or a full disk.
var saveHook func(stage string) error

func hook(stage string) error {
	if saveHook != nil {
		return saveHook(stage)
	}
	return nil
}

func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Temporary files of a save that crashed before its rename.
	if old, _ := filepath.Glob(filepath.Join(dir, "."+base+".tmp-*")); len(old) > 0 {
		for _, p := range old {
			os.Remove(p)
		}
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = hook("write"); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = hook("sync"); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = hook("rename"); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	// The rename is durable only once the directory entry is.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

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
				if o.Rule != r.Name || o.Backend != gb.Addr {
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
		if cfg.Rule(o.Rule) != nil {
			msg = fmt.Sprintf("rule %q has no backend %s; override kept, not applied", o.Rule, o.Backend)
		}
		v.Stale = append(v.Stale, st.issue(oi, "", msg))
	}
	return v
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
