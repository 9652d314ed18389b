package health

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestSetRules: SetRules replaces the targets of the rules it names — a
// new target starts, a missing one stops, one whose check changed restarts
// keeping its state — and leaves every other rule's targets running as
// they were (the same prober, not restarted); a target of a rule it does
// not name is refused, and nothing changes then.
func TestSetRules(t *testing.T) {
	c := New(Options{Seed: 9})
	defer c.Stop()
	check := Check{Kind: TCP, Port: 9, Interval: 300 * time.Second, Timeout: time.Second, HealthyThreshold: 2, UnhealthyThreshold: 2}
	other := check
	other.Port = 10
	tg := func(rule, addr string, ch Check) Target {
		return Target{Key: Key{Rule: rule, Backend: netip.MustParseAddr(addr)}, Check: ch}
	}
	a1, a2, a3 := tg("a", "127.0.1.1", check), tg("a", "127.0.1.2", check), tg("a", "127.0.1.3", check)
	b1, b2 := tg("b", "127.0.1.1", check), tg("b", "127.0.1.2", check)
	if err := c.Set([]Target{a1, a2, a3, b1, b2}); err != nil {
		t.Fatal(err)
	}
	running := func() map[Key]*target {
		c.mu.Lock()
		defer c.mu.Unlock()
		m := make(map[Key]*target, len(c.targets))
		for k, x := range c.targets {
			m[k] = x
		}
		return m
	}
	before := running()
	before[a2.Key].mu.Lock()
	before[a2.Key].tr.successes = 1 // state a restart must keep
	before[a2.Key].mu.Unlock()

	// Rule a: a1 kept, a2 on another port, a3 gone, a4 new; rule b not named.
	a2x, a4 := tg("a", "127.0.1.2", other), tg("a", "127.0.1.4", check)
	if err := c.SetRules(map[string]bool{"a": true}, []Target{a1, a2x, a4}); err != nil {
		t.Fatal(err)
	}
	after := running()
	for _, tc := range []struct {
		what      string
		key       Key
		present   bool
		same      bool // the same prober as before
		successes int
	}{
		{"a1, unchanged", a1.Key, true, true, 0},
		{"a2, its check changed", a2.Key, true, false, 1},
		{"a3, gone", a3.Key, false, false, 0},
		{"a4, new", a4.Key, true, false, 0},
		{"b1, another rule", b1.Key, true, true, 0},
		{"b2, another rule", b2.Key, true, true, 0},
	} {
		x, ok := after[tc.key]
		if ok != tc.present {
			t.Errorf("%s: probed %v, want %v", tc.what, ok, tc.present)
			continue
		}
		if !ok {
			continue
		}
		if (x == before[tc.key]) != tc.same {
			t.Errorf("%s: the same prober %v, want %v", tc.what, x == before[tc.key], tc.same)
		}
		x.mu.Lock()
		got := x.tr.successes
		x.mu.Unlock()
		if got != tc.successes {
			t.Errorf("%s: %d successes, want %d (state kept across a restart)", tc.what, got, tc.successes)
		}
	}
	if after[a2.Key] != nil && after[a2.Key].Check.Port != 10 {
		t.Errorf("a2 probes port %d, want the new check's 10", after[a2.Key].Check.Port)
	}

	// A target of a rule not named: refused, nothing changed.
	err := c.SetRules(map[string]bool{"a": true}, []Target{a1, tg("b", "127.0.1.9", check)})
	if err == nil || !strings.Contains(err.Error(), "not of the rules set") {
		t.Errorf("a target of another rule: %v", err)
	}
	if got := running(); len(got) != len(after) {
		t.Errorf("a refused SetRules changed the targets: %d, want %d", len(got), len(after))
	}
	// No rules named: nothing changes.
	if err := c.SetRules(nil, nil); err != nil || len(running()) != len(after) {
		t.Errorf("SetRules(nil, nil): %v, %d targets, want %d", err, len(running()), len(after))
	}
}
