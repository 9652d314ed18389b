package config

import (
	"net/netip"
	"reflect"
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
