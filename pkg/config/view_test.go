package config

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReapply: after each CLI change, Reapply of the changed rule gives
// what Apply gives, and the other rules' views are the same slices as
// before (not rebuilt).
func TestReapply(t *testing.T) {
	cfg := stateConfig(t)
	st, err := LoadState("/nonexistent/state.toml")
	if err != nil {
		t.Fatal(err)
	}
	v := Apply(cfg, st)
	web, api := netip.MustParseAddr("10.0.1.10"), netip.MustParseAddr("10.0.4.10")
	for _, step := range []struct {
		rule   string
		change func() error
	}{
		{"web", func() error { return st.Drain(cfg, "web", web, time.Unix(100, 0)) }},
		{"api", func() error { return st.SetWeight(cfg, "api", api, 9) }},
		{"web", func() error { return st.Mark(cfg, "web", netip.MustParseAddr("10.0.2.10"), RolePrimary) }},
		{"web", func() error { _, err := st.Undrain(cfg, "web", web); return err }},
		{"api", func() error { _, err := st.Reset(cfg, "api", api); return err }},
	} {
		if err := step.change(); err != nil {
			t.Fatal(err)
		}
		next := v.Reapply(cfg, st, step.rule)
		if want := Apply(cfg, st); !reflect.DeepEqual(next, want) {
			t.Fatalf("after a change of %s: Reapply\n%+v\nApply\n%+v", step.rule, next, want)
		}
		for i := range next.Rules {
			if next.Rules[i].Rule.Name != step.rule && &next.Rules[i].Backends[0] != &v.Rules[i].Backends[0] {
				t.Errorf("rule %s was rebuilt for a change of %s", next.Rules[i].Rule.Name, step.rule)
			}
		}
		v = next
	}
	if len(v.Stale) != 0 {
		t.Errorf("stale %v", v.Stale)
	}
}

// TestApplyFrom: after a reload through a Loader, ApplyFrom gives what
// Apply gives; the rules whose file and overrides did not change keep
// their views (SameView), the others do not.
func TestApplyFrom(t *testing.T) {
	path := writeConfig(t, map[string]string{
		"rules.d/a.toml": ruleText("a", "203.0.113.10", "80", "10.0.1.10"),
		"rules.d/b.toml": ruleText("b", "203.0.113.11", "80", "10.0.1.11"),
		"rules.d/c.toml": ruleText("c", "203.0.113.12", "80", "10.0.1.12"),
	})
	var ld Loader
	cfg, _, err := ld.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := LoadState(filepath.Join(t.TempDir(), "state.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Drain(cfg, "c", netip.MustParseAddr("10.0.1.12"), time.Unix(100, 0)); err != nil {
		t.Fatal(err)
	}
	v := Apply(cfg, st)
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "rules.d", "b.toml"), []byte(ruleText("b", "203.0.113.11", "80", "10.0.1.11", "10.0.1.99")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg2, _, err := ld.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	next := ApplyFrom(v, st, cfg2, st)
	want := Apply(cfg2, st)
	for i := range next.Rules {
		if next.Rules[i].Rule != cfg2.Rules[i] || !reflect.DeepEqual(next.Rules[i].Backends, want.Rules[i].Backends) {
			t.Errorf("rule %s: ApplyFrom differs from Apply", cfg2.Rules[i].Name)
		}
	}
	for i, same := range []bool{true, false, true} { // a kept; b changed; c's override is the same
		if got := SameView(&next.Rules[i], &v.Rules[i]); got != same {
			t.Errorf("rule %s: SameView %v, want %v", next.Rules[i].Rule.Name, got, same)
		}
	}
	// c's override changes: c is computed again.
	st2, err := LoadState(filepath.Join(t.TempDir(), "state.toml"))
	if err != nil {
		t.Fatal(err)
	}
	third := ApplyFrom(next, st, cfg2, st2)
	if SameView(&third.Rules[2], &next.Rules[2]) || !SameView(&third.Rules[0], &next.Rules[0]) || third.Rules[2].Backends[0].Drained {
		t.Errorf("after c's override went: c %+v", third.Rules[2].Backends)
	}
}

// TestPairRules: each rule of the next configuration is paired with the
// previous one's rule of its name, wherever its file went.
func TestPairRules(t *testing.T) {
	rules := func(spec string) []*Rule { // "file:name file:name …"
		var out []*Rule
		for _, f := range strings.Fields(spec) {
			file, name, _ := strings.Cut(f, ":")
			out = append(out, &Rule{File: file, Name: name})
		}
		return out
	}
	for _, tc := range []struct {
		name, prev, next string
		want             []int
	}{
		{"same files", "a:a b:b c:c", "a:a b:b c:c", []int{0, 1, 2}},
		{"a file added", "a:a c:c", "a:a b:b c:c", []int{0, -1, 1}},
		{"a file removed", "a:a b:b c:c", "a:a c:c", []int{0, 2}},
		{"a rule moved to another file", "a:a b:b c:c", "a:a c:c d:b", []int{0, 2, 1}},
		{"two files swap their rules", "a:x b:y", "a:y b:x", []int{1, 0}},
		{"a rule renamed", "a:a b:b", "a:a b:z", []int{0, -1}},
		{"every file elsewhere", "r/a:a r/b:b", "s/a:a s/b:b", []int{0, 1}},
		{"from nothing", "", "a:a", []int{-1}},
		{"to nothing", "a:a", "", []int{}},
	} {
		prev, next := rules(tc.prev), rules(tc.next)
		got := pairRules(len(prev), len(next), func(i int) *Rule { return prev[i] }, func(i int) *Rule { return next[i] })
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestApplyOverManyRules: Apply shares the rules out among goroutines in
// runs; every rule's view is the one applyRule gives it alone, in
// configuration order, overrides included (a drain of a backend of a
// rule in the last, short run).
func TestApplyOverManyRules(t *testing.T) {
	files := map[string]string{}
	for i := range 300 {
		files[fmt.Sprintf("rules.d/r%04d.toml", i)] = ruleText(fmt.Sprintf("r%04d", i), fmt.Sprintf("198.18.%d.%d", 16+i/250, 1+i%250), "80",
			fmt.Sprintf("10.%d.%d.1", 1+i/250, i%250), fmt.Sprintf("10.%d.%d.2", 1+i/250, i%250))
	}
	cfg, _, err := Load(writeConfig(t, files))
	if err != nil {
		t.Fatal(err)
	}
	st, err := LoadState("/nonexistent/state.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Drain(cfg, "r0299", netip.MustParseAddr("10.2.49.2"), time.Unix(100, 0)); err != nil {
		t.Fatal(err)
	}
	v := Apply(cfg, st)
	if len(v.Rules) != len(cfg.Rules) {
		t.Fatalf("%d rule views for %d rules", len(v.Rules), len(cfg.Rules))
	}
	byKey := st.byBackend()
	for i, r := range cfg.Rules {
		if want := applyRule(r, st, byKey); !reflect.DeepEqual(v.Rules[i], want) {
			t.Fatalf("rule %d (%s): view\n%+v\nalone\n%+v", i, r.Name, v.Rules[i], want)
		}
	}
	if last := v.Rules[len(v.Rules)-1]; last.Rule.Name != "r0299" || !last.Backends[1].Drained {
		t.Errorf("the last rule's view is %s with backends %+v, want r0299 with its second backend drained", last.Rule.Name, last.Backends)
	}
}
