package daemon

import (
	"context"
	"log/slog"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/health"
)

// loadRules loads an xlb.toml without health_check_path (checks probe
// directly unless a rule says otherwise) and the rule files given.
func loadRules(t *testing.T, files map[string]string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	files["xlb.toml"] = "interface = \"eth0\"\nhash_seed = \"0x5eed1ab\"\nstate_file = \"" + filepath.Join(dir, "state.toml") + "\"\n"
	return loadFiles(t, dir, files)
}

// targetList is the rule and backend of each target, sorted.
func targetList(ts []health.Target) string {
	var out []string
	for _, tg := range ts {
		out = append(out, tg.Rule+" "+tg.Backend.String())
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// Rules with their own backends share the probe of a backend when it is
// the same probe: an equal check, taken directly. Rule a has x and y, b
// has x and z: with equal direct checks x is probed once, by a (first in
// file order), and b reads a's verdict; with another port, interval or
// kind, or through the data path (each probe goes to its rule's VIP),
// each rule probes x itself.
func TestEqualDirectChecksShareProbes(t *testing.T) {
	x, y, z := "198.51.100.10", "198.51.100.11", "198.51.100.12"
	for _, tc := range []struct {
		name   string
		change func(string) string // of b's file
		want   string
		shared bool
	}{
		{"equal direct checks", func(s string) string { return s }, "a " + x + ", a " + y + ", b " + z, true},
		{"another port", func(s string) string { return strings.Replace(s, "port = 80", "port = 8080", 1) }, "a " + x + ", a " + y + ", b " + x + ", b " + z, false},
		{"another interval", func(s string) string { return strings.Replace(s, "port = 80", "port = 80\ninterval = \"7s\"", 1) }, "a " + x + ", a " + y + ", b " + x + ", b " + z, false},
		{"another kind", func(s string) string {
			return strings.Replace(s, "type = \"TCP\"", "type = \"HTTP\"", 1)
		}, "a " + x + ", a " + y + ", b " + x + ", b " + z, false},
		{"both through the data path", func(s string) string { return strings.Replace(s, "port = 80", "port = 80\npath = \"DATA_PATH\"", 1) }, "a " + x + ", a " + y + ", b " + x + ", b " + z, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := vipRule("203.0.113.10", "", healthGroup(x, y))
			if tc.name == "both through the data path" {
				a = tc.change(a)
			}
			cfg := loadRules(t, map[string]string{
				"rules.d/a.toml": a,
				"rules.d/b.toml": tc.change(vipRule("203.0.113.11", "", healthGroup(x, z))),
			})
			var log strings.Builder
			d := &daemon{cfg: cfg, probes: map[probeKey]probe{}, pendingProbes: map[probeKey]probe{}, nexthops: map[nhKey]nexthop{},
				log: slog.New(slog.NewTextHandler(&log, nil))}
			if got := targetList(d.healthTargets()); got != tc.want {
				t.Fatalf("targets %s, want %s", got, tc.want)
			}
			bx := d.probeKeyOf(cfg.Rule("b"), addr(x))
			if shared := bx.rule == "a"; shared != tc.shared {
				t.Fatalf("b's %s is read from %v, shared %v, want %v", x, bx, shared, tc.shared)
			}
			if !tc.shared {
				return
			}
			// b takes a's verdict; the change names both rules.
			d.nexthops[nhKey{addr(x), false}] = nexthop{}
			d.pendingProbes[probeKey{"a", addr(x)}] = probe{health: failover.HealthUnhealthy, lastError: "connection refused"}
			if !d.applyProbes() {
				t.Fatal("no change applied")
			}
			var fb failover.Backend
			d.applyHealth(cfg.Rule("b"), addr(x), &fb, true)
			if fb.Health != failover.HealthUnhealthy {
				t.Errorf("b's %s is %s, want a's verdict UNHEALTHY", x, fb.Health)
			}
			ev := d.events.list()
			if len(ev) != 1 || ev[0].Rule != "a" || strings.Join(ev[0].Rules, ",") != "a,b" || ev[0].Service != "" {
				t.Errorf("events %+v, want one naming rules a and b, probed through a", ev)
			}
			if !strings.Contains(log.String(), "rules=a,b probe_rule=a backend="+x) {
				t.Errorf("log line does not name both rules and the prober:\n%s", log.String())
			}
			if _, ok := d.probers.followers(probeKey{"a", addr(y)}); ok {
				t.Errorf("a's %s, probed for a alone, names followers", y)
			}
		})
	}
}

// publishedHealth is the health of backend b of rule in d's published
// status ("" if absent).
func publishedHealth(d *daemon, rule string, b string) string {
	for _, r := range d.Status().Rules {
		if r == nil || r.Name != rule || r.State == nil {
			continue
		}
		for _, fb := range r.State.Backends {
			if fb.Name == b {
				return fb.Health.String()
			}
		}
	}
	return ""
}

// TestSharedProbeReload: reloads regroup the probes of the rules they
// change, and a backend keeps its verdict while its probe moves. Rules a
// and b have x with equal direct checks (a probes it), b also y. The
// prober a removed, b probes x and it stays HEALTHY in b (no UNKNOWN in
// between); a back, b keeps probing x and a reads it; b's check changed,
// the rules split and a probes x again, with the verdict b had.
func TestSharedProbeReload(t *testing.T) {
	x, y := "198.51.100.10", "198.51.100.11"
	ruleA := vipRule("203.0.113.10", "", healthGroup(x))
	ruleB := vipRule("203.0.113.11", "", healthGroup(x, y))
	d, dir := healthDaemon(t, map[string]string{"rules.d/a.toml": ruleA, "rules.d/b.toml": ruleB}, []netip.Addr{addr(x), addr(y)})
	probed := func() string { return probedTargets(d) }
	if got, want := probed(), "a "+x+", b "+y; got != want {
		t.Fatalf("at start: probed %s, want %s", got, want)
	}
	// The first verdicts, as the probers would report them.
	d.onHealth(health.Status{Key: health.Key{Rule: "a", Backend: addr(x)}, Health: failover.HealthHealthy})
	d.onHealth(health.Status{Key: health.Key{Rule: "b", Backend: addr(y)}, Health: failover.HealthHealthy})
	if err := do(d, func() error { d.applyProbes(); return d.publish() }); err != nil {
		t.Fatal(err)
	}
	for _, rb := range [][2]string{{"a", x}, {"b", x}, {"b", y}} {
		if h := publishedHealth(d, rb[0], rb[1]); h != "HEALTHY" {
			t.Fatalf("before the reloads: rule %s backend %s %q, want HEALTHY", rb[0], rb[1], h)
		}
	}
	before := len(d.events.list())
	for _, step := range []struct {
		what    string
		change  map[string]string
		want    string
		healthy [][2]string
	}{
		{"the prober a removed", map[string]string{"rules.d/a.toml": ""}, "b " + x + ", b " + y, [][2]string{{"b", x}, {"b", y}}},
		{"a back (b keeps probing)", map[string]string{"rules.d/a.toml": ruleA}, "b " + x + ", b " + y, [][2]string{{"a", x}, {"b", x}, {"b", y}}},
		{"b's check on another port (split)", map[string]string{"rules.d/b.toml": strings.Replace(ruleB, "port = 80", "port = 8080", 1)},
			"a " + x + ", b " + x + ", b " + y, [][2]string{{"a", x}, {"b", x}, {"b", y}}},
	} {
		reloadWith(t, d, dir, step.change)
		if got := probed(); got != step.want {
			t.Errorf("%s: probed %s, want %s", step.what, got, step.want)
		}
		if step.what == "a back (b keeps probing)" {
			// backend list shows a's row with b's verdict and prober.
			if rows := backendRows(t, d); rows["a "+x] != "HEALTHY probe_rule=b" || rows["b "+x] != "HEALTHY probe_rule=" {
				t.Errorf("%s: backend list shows %v, want a's %s HEALTHY probed through b", step.what, rows, x)
			}
		}
		// As the reload published it, and as every rule computed again
		// reads it.
		for _, again := range []bool{false, true} {
			if again {
				if err := do(d, func() error { d.touchAll(); return d.publish() }); err != nil {
					t.Fatal(err)
				}
			}
			for _, rb := range step.healthy {
				if h := publishedHealth(d, rb[0], rb[1]); h != "HEALTHY" {
					t.Errorf("%s (computed again %v): rule %s backend %s published %q, want HEALTHY (the last verdict until the new prober's first)", step.what, again, rb[0], rb[1], h)
				}
			}
		}
	}
	// The split left each rule its own check.
	if rows := backendRows(t, d); rows["a "+x] != "HEALTHY probe_rule=" || rows["b "+x] != "HEALTHY probe_rule=" {
		t.Errorf("after the split, backend list shows %v, want a and b each with its own probe of %s", rows, x)
	}
	ports := map[string]uint16{}
	for _, tg := range d.healthTargetsOf(nil) {
		if tg.Backend == addr(x) {
			ports[tg.Rule] = tg.Check.Port
		}
	}
	if ports["a"] != 80 || ports["b"] != 8080 {
		t.Errorf("after the split, %s is probed on ports %v, want a 80 and b 8080", x, ports)
	}
	// b's check back to a's: b reads a's probe of x again, and a verdict
	// b's former prober had parked is read by nobody.
	reloadWith(t, d, dir, map[string]string{"rules.d/b.toml": ruleB})
	if got, want := probed(), "a "+x+", b "+y; got != want {
		t.Errorf("b rejoined: probed %s, want %s", got, want)
	}
	d.onHealth(health.Status{Key: health.Key{Rule: "b", Backend: addr(x)}, Health: failover.HealthUnhealthy})
	if err := do(d, func() error { d.applyProbes(); d.touchAll(); return d.publish() }); err != nil {
		t.Fatal(err)
	}
	if h := publishedHealth(d, "b", x); h != "HEALTHY" {
		t.Errorf("a verdict parked by b's former probe of %s made it %s, want a's HEALTHY", x, h)
	}
	for _, e := range d.events.list()[before:] {
		if e.Kind == eventHealth {
			t.Errorf("a health event after the first verdicts (a reload's, or a stale verdict's): %+v", e)
		}
	}
	// a's verdict of x changes: the next publication computes b again.
	d.onHealth(health.Status{Key: health.Key{Rule: "a", Backend: addr(x)}, Health: failover.HealthUnhealthy})
	if err := do(d, func() error { d.applyProbes(); return d.publish() }); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"a", "b"} {
		if h := publishedHealth(d, r, x); h != "UNHEALTHY" {
			t.Errorf("after a's probe of %s failed, rule %s published %s, want UNHEALTHY", x, r, h)
		}
	}
}

// backendRows is what backend list shows of each rule's backend: its
// health and the rule whose probe decides it, by "rule backend".
func backendRows(t *testing.T, d *daemon) map[string]string {
	t.Helper()
	stream, err := (&ops{d: d}).Backends(context.Background(), control.StatusQuery{})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	err = stream(func(r *control.Rule) error {
		for _, b := range r.Backends {
			rows[r.Name+" "+b.Address] = b.Health + " probe_rule=" + b.ProbeRule
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// A successor groups the probes afresh and may choose another prober than
// its predecessor did (which kept a prober that still qualified): the
// verdict carried under the predecessor's prober moves to the new one, so
// no rule of the group starts UNKNOWN. Here rule b probed x for a and b
// (a was added later); the successor's prober of x is a, the first.
func TestSharedProbeAcrossRestart(t *testing.T) {
	x := "198.51.100.10"
	cfg := loadRules(t, map[string]string{
		"rules.d/a.toml": vipRule("203.0.113.10", "", healthGroup(x)),
		"rules.d/b.toml": vipRule("203.0.113.11", "", healthGroup(x)),
	})
	d := &daemon{cfg: cfg, nexthops: map[nhKey]nexthop{{addr(x), false}: {}},
		probes: map[probeKey]probe{{"b", addr(x)}: {health: failover.HealthHealthy}}} // as restoreState leaves them
	ts := d.healthTargets()
	if got := targetList(ts); got != "a "+x {
		t.Fatalf("targets %s, want a %s", got, x)
	}
	// a's prober starts from the verdict it takes over, not from UNKNOWN.
	if f := ts[0].From; f == nil || f.Health != failover.HealthHealthy {
		t.Errorf("a's target starts from %+v, want the carried HEALTHY", f)
	}
	for _, name := range []string{"a", "b"} {
		var fb failover.Backend
		d.applyHealth(cfg.Rule(name), addr(x), &fb, true)
		if fb.Health != failover.HealthHealthy {
			t.Errorf("rule %s: %s is %s, want the carried HEALTHY", name, x, fb.Health)
		}
	}
	if _, stale := d.probes[probeKey{"b", addr(x)}]; stale {
		t.Errorf("the verdict under b, read by nobody now, is kept")
	}
}

// TestRegroupWithoutVerdicts: a start that carries no verdict groups the
// probes as one that does (the same probers, every rule reading the same
// key) and lists no move; with a verdict carried, the move is listed.
func TestRegroupWithoutVerdicts(t *testing.T) {
	x, y := "198.51.100.10", "198.51.100.11"
	cfg := loadRules(t, map[string]string{
		"rules.d/a.toml": vipRule("203.0.113.10", "", healthGroup(x, y)),
		"rules.d/b.toml": vipRule("203.0.113.11", "", healthGroup(x)),
		"rules.d/c.toml": vipRule("203.0.113.12", "", healthGroup(y)),
	})
	var with, without proberCache
	movedWith, probersWith := with.regroup(cfg, nil, true)
	movedWithout, probersWithout := without.regroup(cfg, nil, false)
	if len(movedWith) == 0 {
		t.Fatal("with moves: none listed for the rules that read another's probe")
	}
	if len(movedWithout) != 0 {
		t.Errorf("without verdicts: moves %v listed", movedWithout)
	}
	if !maps.Equal(probersWith, probersWithout) {
		t.Errorf("probers %v without moves, %v with", probersWithout, probersWith)
	}
	for _, r := range cfg.Rules {
		for _, b := range r.Backends() {
			if p, q := with.prober(r.Name, b.Addr), without.prober(r.Name, b.Addr); p != q {
				t.Errorf("rule %s, %s: read from %s without moves, %s with", r.Name, b.Addr, q, p)
			}
		}
	}
}
