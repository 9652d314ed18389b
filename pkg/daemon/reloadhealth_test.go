package daemon

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/health"
)

// frozenClock never moves and its timers never fire: a Checker on it
// holds its targets and never probes (no packet leaves a unit test).
type frozenClock struct{}

func (frozenClock) Now() time.Time                      { return time.Unix(1e9, 0) }
func (frozenClock) NewTimer(time.Duration) health.Timer { return frozenTimer{} }

type frozenTimer struct{}

func (frozenTimer) C() <-chan time.Time { return nil }
func (frozenTimer) Stop() bool          { return true }

// healthDaemon is testDaemon over rules with TCP checks, its checker on
// a frozen clock.
func healthDaemon(tb testing.TB, files map[string]string, addrs []netip.Addr) (*daemon, string) {
	tb.Helper()
	d, dir := testDaemon(tb, files, addrs)
	err := do(d, func() error {
		d.checker.Stop()
		d.checker = health.New(health.Options{OnChange: d.onHealth, Clock: frozenClock{}})
		return d.checker.Set(d.healthTargets())
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(d.checker.Stop)
	return d, dir
}

// probedTargets lists the rule and backend of every target d's checker
// probes, sorted.
func probedTargets(d *daemon) string {
	var got []string
	for _, s := range d.checker.Status() {
		got = append(got, s.Rule+" "+s.Backend.String())
	}
	slices.Sort(got)
	return strings.Join(got, ", ")
}

// reloadWith writes the files of change into dir ("" removes one) and
// reloads d.
func reloadWith(tb testing.TB, d *daemon, dir string, change map[string]string) {
	tb.Helper()
	for name, text := range change {
		p := filepath.Join(dir, name)
		if text == "" {
			os.Remove(p)
		} else if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	if err := do(d, func() error { _, err := d.Reload(false); return err }); err != nil {
		tb.Fatal(err)
	}
}

func healthGroup(addrs ...string) string {
	return "[[group]]\nname = \"g\"\nbackends = [\"" + strings.Join(addrs, "\", \"") + "\"]\n"
}

// TestReloadHealthTargets: after a reload the checker probes exactly the
// new configuration's targets — a changed rule's new backend added, a
// removed rule's targets gone, the others kept — whether the reload set
// only the changed rules' targets or, with a backend service among them,
// every target.
func TestReloadHealthTargets(t *testing.T) {
	files := map[string]string{
		"rules.d/a.toml":      vipRule("203.0.113.10", "", healthGroup("198.51.100.10", "198.51.100.11")),
		"rules.d/b.toml":      vipRule("203.0.113.11", "", healthGroup("198.51.100.20")),
		"rules.d/c.toml":      vipRule("203.0.113.12", "", healthGroup("198.51.100.30")),
		"services.d/www.toml": "[health_check]\ntype = \"TCP\"\nport = 80\n" + healthGroup("198.51.100.40"),
	}
	var addrs []netip.Addr
	for _, a := range []string{"198.51.100.10", "198.51.100.11", "198.51.100.12", "198.51.100.20", "198.51.100.30", "198.51.100.40"} {
		addrs = append(addrs, addr(a))
	}
	d, dir := healthDaemon(t, files, addrs)
	probed := func() string { return probedTargets(d) }
	reload := func(change map[string]string) { t.Helper(); reloadWith(t, d, dir, change) }
	if got, want := probed(), "a 198.51.100.10, a 198.51.100.11, b 198.51.100.20, c 198.51.100.30"; got != want {
		t.Fatalf("at start: %s, want %s", got, want)
	}
	for _, tc := range []struct {
		what   string
		change map[string]string
		want   string
	}{
		{"a backend added to a, c removed", map[string]string{
			"rules.d/a.toml": vipRule("203.0.113.10", "", healthGroup("198.51.100.10", "198.51.100.11", "198.51.100.12")),
			"rules.d/c.toml": "",
		}, "a 198.51.100.10, a 198.51.100.11, a 198.51.100.12, b 198.51.100.20"},
		{"b's check on another port", map[string]string{
			"rules.d/b.toml": strings.Replace(vipRule("203.0.113.11", "", healthGroup("198.51.100.20")), "port = 80", "port = 8080", 1),
		}, "a 198.51.100.10, a 198.51.100.11, a 198.51.100.12, b 198.51.100.20"},
		{"a rule of a backend service added (every target set)", map[string]string{
			"rules.d/w.toml": "vip = \"203.0.113.20\"\nports = [\"443\"]\nbackend_service = \"www\"\n",
		}, "a 198.51.100.10, a 198.51.100.11, a 198.51.100.12, b 198.51.100.20, w 198.51.100.40"},
		{"a removed beside the service's rule", map[string]string{
			"rules.d/a.toml": "",
		}, "b 198.51.100.20, w 198.51.100.40"},
	} {
		reload(tc.change)
		if got := probed(); got != tc.want {
			t.Errorf("%s: probed %s, want %s", tc.what, got, tc.want)
		}
	}
}

// BenchmarkReloadHealth: a reload that adds one backend to one of n rules
// of 100 backends, every rule TCP-checked, with the checker set for the
// changed rule only (SetRules) against every target set again (the same
// reload followed by a Set of every target, which is what a reload did
// instead of SetRules). Each rule has backends of its own (n × 100
// targets), or (shared) draws them from a pool of n × 10 addresses as
// bench/scale does, so that every address serves 10 rules with equal
// direct checks: one target per address (services.go).
func BenchmarkReloadHealth(b *testing.B) {
	for _, layout := range []struct{ n, pool int }{{100, 0}, {1000, 0}, {1000, 10000}} {
		n := layout.n
		backend := func(i, j int) netip.Addr {
			if layout.pool == 0 {
				return scaleBackend(i, j)
			}
			p := (i*100 + j) % layout.pool
			return scaleBackend(p/100, p%100)
		}
		files := map[string]string{}
		seen := map[netip.Addr]bool{}
		var addrs []netip.Addr
		var rule0 []netip.Addr
		for i := range n {
			var bs []string
			for j := range 100 {
				a := backend(i, j)
				bs = append(bs, a.String())
				if i == n/2 {
					rule0 = append(rule0, a)
				}
				if !seen[a] {
					seen[a] = true
					addrs = append(addrs, a)
				}
			}
			files[fmt.Sprintf("rules.d/r%05d.toml", i)] = vipRule(fmt.Sprintf("198.18.%d.%d", 16+i/250, 1+i%250), fmt.Sprintf("name = \"r%05d\"", i), healthGroup(bs...))
		}
		extra := scaleBackend(n/2, 100) // in no rule, nor in the pool
		addrs = append(addrs, extra)
		d, dir := healthDaemon(b, files, addrs)
		name := fmt.Sprintf("r%05d", n/2)
		file := filepath.Join(dir, "rules.d", name+".toml")
		var bs []string
		for _, a := range rule0 {
			bs = append(bs, a.String())
		}
		texts := []string{
			vipRule(fmt.Sprintf("198.18.%d.%d", 16+(n/2)/250, 1+(n/2)%250), "name = \""+name+"\"", healthGroup(append(slices.Clone(bs), extra.String())...)),
			vipRule(fmt.Sprintf("198.18.%d.%d", 16+(n/2)/250, 1+(n/2)%250), "name = \""+name+"\"", healthGroup(bs...)),
		}
		prefix := fmt.Sprintf("rules=%d", n)
		if layout.pool > 0 {
			prefix += fmt.Sprintf("/shared=%d", layout.pool)
			if got := len(d.checker.Status()); got != layout.pool {
				b.Fatalf("%s: %d targets, want one per address of the pool, %d", prefix, got, layout.pool)
			}
		}
		for _, how := range []string{"changed-rules", "every-target"} {
			b.Run(prefix+"/"+how, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					if err := os.WriteFile(file, []byte(texts[i%2]), 0o644); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					err := do(d, func() error {
						if _, err := d.Reload(false); err != nil {
							return err
						}
						if how == "every-target" {
							return d.checker.Set(d.healthTargets())
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
