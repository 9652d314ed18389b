package daemon

import (
	"encoding/json"
	"flag"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/config"
)

// serviceConfig loads a configuration with backend service www (IPv6
// backends 2001:db8:1::10 and ::11) named by an IPv4 TCP rule and an
// IPv6 TCP and UDP rule, and a rule web with its own backends.
func serviceConfig(t *testing.T) *config.Config {
	t.Helper()
	return serviceConfigWith(t, nil)
}

// serviceConfigWith is serviceConfig with files changed: a file given
// "" is left out.
func serviceConfigWith(t *testing.T, change map[string]string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"xlb.toml": "interface = \"eth0\"\nhash_seed = \"0x5eed1ab\"\nstate_file = \"" + filepath.Join(dir, "state.toml") + "\"\n",
		"services.d/www.toml": "[health_check]\ntype = \"HTTP\"\nport = 8080\n" +
			"[[group]]\nname = \"a\"\nbackends = [\"2001:db8:1::10\", \"2001:db8:1::11\"]\n",
		"rules.d/a-www4.toml":  "vip = \"203.0.113.31\"\nports = [\"443\"]\nbackend_service = \"www\"\n",
		"rules.d/b-www6.toml":  "vip = \"2001:db8::31\"\nports = [\"443\"]\nbackend_service = \"www\"\n",
		"rules.d/c-www6u.toml": "vip = \"2001:db8::31\"\nprotocol = \"UDP\"\nports = [\"443\"]\nbackend_service = \"www\"\n",
		"rules.d/web.toml":     webRule("", "[[group]]\nname = \"a\"\nbackends = [\"10.0.1.10\"]\n"),
	}
	for name, text := range change {
		files[name] = text
	}
	return loadFiles(t, dir, files)
}

// loadFiles writes files into dir (one given "" is left out) and loads
// dir/xlb.toml.
func loadFiles(t *testing.T, dir string, files map[string]string) *config.Config {
	t.Helper()
	for name, text := range files {
		if text == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, _, err := config.Load(filepath.Join(dir, "xlb.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The rules of a backend service share one prober per backend: the
// checker gets one target per backend of the service (from the first rule
// of the backend's family), and every rule of the service takes its
// verdict.
func TestServiceSharesProbes(t *testing.T) {
	cfg := serviceConfig(t)
	d := &daemon{cfg: cfg, probes: map[probeKey]probe{}, nexthops: map[nhKey]nexthop{}}
	var got []string
	for _, tg := range d.healthTargets() {
		got = append(got, tg.Key.Rule+" "+tg.Key.Backend.String())
	}
	want := []string{"b-www6 2001:db8:1::10", "b-www6 2001:db8:1::11", "web 10.0.1.10"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("targets %v, want %v", got, want)
	}
	down, up := addr("2001:db8:1::10"), addr("2001:db8:1::11")
	d.probes[probeKey{"b-www6", down}] = probe{health: failover.HealthUnhealthy}
	d.probes[probeKey{"b-www6", up}] = probe{health: failover.HealthHealthy}
	for _, a := range []netip.Addr{down, up} {
		d.nexthops[nhKey{a, false}] = nexthop{}
	}
	for _, name := range []string{"a-www4", "b-www6", "c-www6u"} {
		r := cfg.Rule(name)
		for a, want := range map[netip.Addr]failover.Health{down: failover.HealthUnhealthy, up: failover.HealthHealthy} {
			var fb failover.Backend
			d.applyHealth(r, a, &fb, true)
			if fb.Health != want {
				t.Errorf("rule %s backend %s: %s, want %s (the service's verdict)", name, a, fb.Health, want)
			}
		}
	}
	if k := d.probeKeyOf(cfg.Rule("web"), addr("10.0.1.10")); k != (probeKey{"web", addr("10.0.1.10")}) {
		t.Errorf("a rule with its own backends probes them itself: %v", k)
	}
	if s := changeTarget(cfg, "a-www4"); s != "backend service www (rules a-www4, b-www6, c-www6u)" {
		t.Errorf("changeTarget(a-www4) = %q", s)
	}
	if s := changeTarget(cfg, "web"); s != "rule web" {
		t.Errorf("changeTarget(web) = %q", s)
	}
}

// A reload keeps a service's prober when it still qualifies (a rule added
// before it does not restart the probes), and when its prober goes the
// backend keeps its verdict until the new prober's first.
func TestServiceProberMoves(t *testing.T) {
	d := &daemon{cfg: serviceConfig(t), probes: map[probeKey]probe{}, nexthops: map[nhKey]nexthop{}}
	d.healthTargets()
	b := addr("2001:db8:1::10")
	d.probes[probeKey{"b-www6", b}] = probe{health: failover.HealthHealthy}
	// A rule of the same family before the prober, by file name.
	earlier := "vip = \"2001:db8::32\"\nports = [\"443\"]\nbackend_service = \"www\"\n"
	d.cfg = serviceConfigWith(t, map[string]string{"rules.d/a-www6x.toml": earlier})
	d.healthTargets()
	if k := d.probeKeyOf(d.cfg.Rule("a-www6x"), b); k.rule != "b-www6" {
		t.Errorf("after adding a rule before it, %s is probed by %s, want b-www6 still", b, k.rule)
	}
	// The prober's rule removed: the first rule of the family takes over
	// with the last verdict.
	d.cfg = serviceConfigWith(t, map[string]string{"rules.d/a-www6x.toml": earlier, "rules.d/b-www6.toml": ""})
	var probers []string
	for _, tg := range d.healthTargets() {
		if tg.Key.Backend == b {
			probers = append(probers, tg.Key.Rule)
		}
	}
	if len(probers) != 1 || probers[0] != "a-www6x" {
		t.Fatalf("probers of %s: %v, want a-www6x", b, probers)
	}
	d.nexthops[nhKey{b, false}] = nexthop{}
	var fb failover.Backend
	d.applyHealth(d.cfg.Rule("c-www6u"), b, &fb, true)
	if fb.Health != failover.HealthHealthy {
		t.Errorf("after the prober moved, %s is %s, want the last verdict HEALTHY", b, fb.Health)
	}
	// The new prober's verdicts name the service and its rules now.
	if f, ok := d.probers.followers(probeKey{"a-www6x", b}); !ok || f.service != "www" || strings.Join(f.rules, ",") != "a-www4,a-www6x,c-www6u" {
		t.Errorf("the new prober a-www6x of %s names %+v (%v), want service www with rules a-www4, a-www6x, c-www6u", b, f, ok)
	}
	if f, ok := d.probers.followers(probeKey{"b-www6", b}); ok {
		t.Errorf("the removed prober b-www6 still names %+v", f)
	}
}

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden from the code's output")

// A health change names what it decides: a backend service's verdict its
// service, every rule of it that has the backend and the rule whose probe
// decided; a rule with its own backends itself, as before. The log lines
// and the events (as JSON, the wire form of xlb status) are compared with
// testdata/health-events.golden; the status rendering of the events is in
// cmd/xlb's golden status.
func TestHealthEventsNameService(t *testing.T) {
	var buf strings.Builder
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	d := &daemon{cfg: serviceConfig(t), log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: noTime})),
		probes: map[probeKey]probe{}, pendingProbes: map[probeKey]probe{}}
	d.healthTargets() // services.go: which rule probes each backend of www
	d.pendingProbes[probeKey{"b-www6", addr("2001:db8:1::10")}] = probe{health: failover.HealthUnhealthy, lastError: "connection refused"}
	d.pendingProbes[probeKey{"b-www6", addr("2001:db8:1::11")}] = probe{health: failover.HealthHealthy}
	d.pendingProbes[probeKey{"web", addr("10.0.1.10")}] = probe{health: failover.HealthUnhealthy, lastError: "timeout"}
	if !d.applyProbes() {
		t.Fatal("no change applied")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for _, e := range d.events.list() {
		e.At = time.Time{}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", "health-events.golden")
	if *updateGolden {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("health log lines and events differ from %s (go test -update rewrites it):\n got:\n%s\nwant:\n%s", path, got, want)
	}
}
