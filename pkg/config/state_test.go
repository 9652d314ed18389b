package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var (
	b10 = netip.MustParseAddr("10.0.1.10")
	b11 = netip.MustParseAddr("10.0.1.11")
	b20 = netip.MustParseAddr("10.0.2.10")
	a10 = netip.MustParseAddr("10.0.4.10")
)

// stateConfig loads a config with a plain rule "web" (group a primary:
// 10.0.1.10, 10.0.1.11; group b failover: 10.0.2.10) and a weighted rule
// "api" (10.0.4.10).
func stateConfig(t *testing.T) *Config {
	t.Helper()
	api := lines(`name = "api"`, `vip = "203.0.113.20"`, `ports = ["443"]`, `locality_lb_policy = "WEIGHTED_MAGLEV"`,
		`[health_check]`, `type = "HTTP"`, `[[group]]`, `name = "a"`, `backends = ["10.0.4.10"]`)
	web := webRule + lines(`[[group]]`, `name = "b"`, `role = "failover"`, `backends = ["10.0.2.10"]`)
	path := writeConfig(t, map[string]string{"rules.d/web.toml": web, "rules.d/api.toml": api})
	cfg, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestStateRoundTrip(t *testing.T) {
	cfg := stateConfig(t)
	rulesBefore := snapshotDir(t, cfg.RulesDir)
	path := filepath.Join(t.TempDir(), "lib", "state.toml")
	st, err := LoadState(path)
	if err != nil || len(st.Overrides) != 0 {
		t.Fatalf("missing state file: %v, %v; want an empty State", st, err)
	}
	now := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	must(t, st.Mark(cfg, "web", b11, RoleFailover))
	must(t, st.Drain(cfg, "web", b10, now))
	must(t, st.Drain(cfg, "web", b10, now.Add(time.Hour))) // keeps the first start
	must(t, st.SetWeight(cfg, "api", a10, 0))
	must(t, st.Save(path))

	got, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Override{
		{Rule: "api", Backend: a10, WeightSet: true, Weight: 0},
		{Rule: "web", Backend: b10, Drained: true, DrainedAt: now},
		{Rule: "web", Backend: b11, RoleSet: true, Role: RoleFailover},
	}
	if !reflect.DeepEqual(got.Overrides, want) {
		t.Errorf("reloaded overrides:\n got %+v\nwant %+v", got.Overrides, want)
	}

	v := Apply(cfg, got)
	if len(v.Stale) != 0 {
		t.Errorf("stale: %v", v.Stale)
	}
	type eff struct {
		rule, addr string
		role       Role
		roleSrc    Source
		drained    bool
		drainSrc   Source
		weight     uint16
		hasWeight  bool
		weightSrc  Source
	}
	var effs []eff
	for _, rv := range v.Rules {
		for _, b := range rv.Backends {
			effs = append(effs, eff{rv.Rule.Name, b.Addr.String(), b.Role, b.RoleSource, b.Drained, b.DrainedSource, b.Weight, b.HasWeight, b.WeightSource})
		}
	}
	wantEffs := []eff{
		{"api", "10.0.4.10", RolePrimary, SourceConfig, false, SourceConfig, 0, true, SourceCLI},
		{"web", "10.0.1.10", RolePrimary, SourceConfig, true, SourceCLI, 0, false, SourceConfig},
		{"web", "10.0.1.11", RoleFailover, SourceCLI, false, SourceConfig, 0, false, SourceConfig},
		{"web", "10.0.2.10", RoleFailover, SourceConfig, false, SourceConfig, 0, false, SourceConfig},
	}
	if !reflect.DeepEqual(effs, wantEffs) {
		t.Errorf("effective view:\n got %+v\nwant %+v", effs, wantEffs)
	}
	if SourceCLI.String() != "cli" || SourceConfig.String() != "config" {
		t.Errorf("source names: %s %s", SourceConfig, SourceCLI)
	}
	// The config itself is untouched by Apply, and the rule files by Save.
	if cfg.Rules[1].Groups[0].Role != RolePrimary {
		t.Error("Apply changed the Config")
	}
	if after := snapshotDir(t, cfg.RulesDir); !reflect.DeepEqual(after, rulesBefore) {
		t.Error("rule files changed")
	}
	// Only the state file is left in its directory.
	assertOnlyFile(t, filepath.Dir(path), "state.toml")
}

func TestStateReset(t *testing.T) {
	cfg := stateConfig(t)
	st := &State{}
	must(t, st.Mark(cfg, "web", b11, RoleFailover))
	must(t, st.Drain(cfg, "web", b11, time.Now()))
	undrain := func() bool {
		t.Helper()
		ok, err := st.Undrain(cfg, "web", b11)
		must(t, err)
		return ok
	}
	if !undrain() || undrain() {
		t.Error("Undrain: want true once, then false")
	}
	if len(st.Overrides) != 1 || !st.Overrides[0].RoleSet {
		t.Fatalf("after undrain: %+v", st.Overrides)
	}
	reset := func() bool {
		t.Helper()
		ok, err := st.Reset(cfg, "web", b11)
		must(t, err)
		return ok
	}
	if !reset() {
		t.Error("Reset of an override returned false")
	}
	if reset() {
		t.Error("second Reset returned true")
	}
	// A backend neither configured nor overridden is an error, not
	// "nothing to do" (one exit-status rule: a refused change exits 1).
	for _, c := range []struct {
		rule string
		addr netip.Addr
		want string
	}{
		{"web", netip.MustParseAddr("10.9.9.9"), `rule "web" has no backend 10.9.9.9`},
		{"nope", b11, `no rule "nope"`},
	} {
		if _, err := st.Undrain(cfg, c.rule, c.addr); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Undrain %s %s: %v, want %q", c.rule, c.addr, err, c.want)
		}
		if _, err := st.Reset(cfg, c.rule, c.addr); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Reset %s %s: %v, want %q", c.rule, c.addr, err, c.want)
		}
	}
	if len(st.Overrides) != 0 {
		t.Errorf("after reset: %+v", st.Overrides)
	}
	// Marking a backend with its group's own role removes the override.
	must(t, st.Mark(cfg, "web", b20, RolePrimary))
	must(t, st.Mark(cfg, "web", b20, RoleFailover))
	if len(st.Overrides) != 0 {
		t.Errorf("marking back to the config role left %+v", st.Overrides)
	}
}

func TestStateRefusals(t *testing.T) {
	cfg := stateConfig(t)
	st := &State{}
	must(t, st.Mark(cfg, "web", b10, RoleFailover))
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"last primary", st.Mark(cfg, "web", b11, RoleFailover), `mark backend: rule "web" would have no primary backend`},
		{"unknown rule", st.Mark(cfg, "nope", b11, RoleFailover), `mark backend: no rule "nope"`},
		{"unknown backend", st.Drain(cfg, "web", a10, time.Now()), `drain backend: rule "web" has no backend 10.0.4.10`},
		{"weight on maglev", st.SetWeight(cfg, "web", b10, 5), `set weight: rule "web" uses MAGLEV; weights need WEIGHTED_MAGLEV`},
		{"weight too big", st.SetWeight(cfg, "api", a10, 1001), `set weight: 1001 is outside [0, 1000]`},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("%s: got %v, want %q", tc.name, tc.err, tc.want)
		}
	}
	if len(st.Overrides) != 1 {
		t.Errorf("a refused change altered the state: %+v", st.Overrides)
	}
}

func TestStateStaleOverridesKept(t *testing.T) {
	cfg := stateConfig(t)
	path := filepath.Join(t.TempDir(), "state.toml")
	text := lines(
		`version = 1`,
		`[[override]]`,
		`rule = "gone"`,
		`backend = "10.9.9.9"`,
		`drained = true`,
		`[[override]]`,
		`rule = "web"`,
		`backend = "10.0.1.99"`,
		`role = "failover"`,
		`[[override]]`,
		`rule = "web"`,
		`backend = "10.0.1.10"`,
		`weight = 7`,
	)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	v := Apply(cfg, st)
	var got []string
	for _, is := range v.Stale {
		got = append(got, is.String())
	}
	want := []string{
		path + `:13: override[2].weight: weight override ignored: rule "web" uses MAGLEV`,
		path + `:2: override[0]: rule "gone" is not in the configuration; override kept, not applied`,
		path + `:6: override[1]: rule "web" has no backend 10.0.1.99; override kept, not applied`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stale:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Saving keeps them; reset removes one.
	must(t, st.Save(path))
	st2, err := LoadState(path)
	if err != nil || len(st2.Overrides) != 3 {
		t.Fatalf("after save: %v %+v", err, st2)
	}
	if ok, err := st2.Reset(cfg, "gone", netip.MustParseAddr("10.9.9.9")); !ok || err != nil {
		t.Fatal("reset of a stale override failed")
	}
	must(t, st2.Save(path))
	st3, _ := LoadState(path)
	if len(st3.Overrides) != 2 {
		t.Errorf("after reset: %+v", st3.Overrides)
	}
}

func TestLoadStateErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.toml")
	text := lines(
		`version = 2`,
		`[[override]]`,
		`rule = "web"`,
		`backend = "10.0.1"`,
		`role = "spare"`,
		`weight = 5000`,
		`color = 1`,
		`[[override]]`,
		`backend = "10.0.1.10"`,
	)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := LoadState(path)
	if st != nil {
		t.Error("LoadState returned a State with an error")
	}
	got := issueStrings(t, err)
	want := []string{
		path + `:1: version: 2 is outside [1, 1]`,
		path + `:4: override[0].backend: "10.0.1" is not an IPv4 or IPv6 address`,
		path + `:5: override[0].role: "spare" is not one of primary, failover`,
		path + `:6: override[0].weight: 5000 is outside [0, 1000]`,
		path + `:7: override[0].color: unknown key`,
		path + `:8: override[1].rule: missing`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSaveAtomic fails a save at every stage, as a crash or a full disk
// would: the previous file must stay whole and no temporary file may stay.
func TestSaveAtomic(t *testing.T) {
	cfg := stateConfig(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "state.toml")
	st := &State{}
	must(t, st.Drain(cfg, "web", b10, time.Unix(1e9, 0)))
	must(t, st.Save(path))
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	must(t, st.Mark(cfg, "web", b11, RoleFailover))
	boom := errors.New("disk on fire")
	for _, stage := range []string{"write", "sync", "rename"} {
		t.Run(stage, func(t *testing.T) {
			saveHook = func(s string) error {
				if s == stage {
					return boom
				}
				return nil
			}
			defer func() { saveHook = nil }()
			if err := st.Save(path); !errors.Is(err, boom) {
				t.Fatalf("Save = %v, want the injected error", err)
			}
			now, err := os.ReadFile(path)
			if err != nil || string(now) != string(old) {
				t.Errorf("state file changed by a failed save:\n%s", now)
			}
			assertOnlyFile(t, dir, "state.toml")
		})
	}
	// A temporary file left by a process that died before its rename is
	// ignored by LoadState and cleaned up by the next Save.
	leftover := filepath.Join(dir, ".state.toml.tmp-123")
	if err := os.WriteFile(leftover, []byte("half a fi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadState(path); err != nil || len(got.Overrides) != 1 {
		t.Fatalf("LoadState with a leftover temp file: %v %+v", err, got)
	}
	must(t, st.Save(path))
	assertOnlyFile(t, dir, "state.toml")
	got, err := LoadState(path)
	if err != nil || len(got.Overrides) != 2 {
		t.Errorf("after a good save: %v %+v", err, got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func assertOnlyFile(t *testing.T, dir, name string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if !reflect.DeepEqual(names, []string{name}) {
		t.Errorf("directory holds %v, want only %s", names, name)
	}
}

func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}
