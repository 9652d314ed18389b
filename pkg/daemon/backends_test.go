package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
)

// controlDaemon is a daemon without a data plane whose control goroutine
// serves requests until the test ends: enough for the control API's
// checks that refuse before anything is published.
func controlDaemon(t *testing.T, rules map[string]string) *daemon {
	t.Helper()
	cfg, st := writeConfig(t, rules)
	d := &daemon{cfg: cfg, state: st, view: config.Apply(cfg, st), log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		requests: make(chan func()), reg: newRegistry(), rules: map[string]*ruleRuntime{}}
	serveRequests(t, d)
	return d
}

// serveRequests runs d's control requests (d.do) on a goroutine of the
// test, as the control loop would, until the test ends.
func serveRequests(tb testing.TB, d *daemon) {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case f := <-d.requests:
				f()
			case <-done:
				return
			}
		}
	}()
	tb.Cleanup(func() { close(done) })
}

// TestChangeUnknownBackend: undrain and reset of a backend the rule does
// not have are refused (400, exit 1 in the CLI) instead of answering
// "was not drained" (docs/design.md#command-line: one exit-status rule).
func TestChangeUnknownBackend(t *testing.T) {
	d := controlDaemon(t, map[string]string{"web": webRule("", "[[group]]\nname = \"a\"\nbackends = [\"10.0.0.1\"]\n")})
	o := &ops{d: d}
	for _, c := range []struct {
		action  control.BackendAction
		rule    string
		backend string
		want    string
	}{
		{control.ActionUndrain, "web", "10.0.0.9", `rule "web" has no backend 10.0.0.9`},
		{control.ActionReset, "web", "10.0.0.9", `rule "web" has no backend 10.0.0.9`},
		{control.ActionDrain, "web", "10.0.0.9", `rule "web" has no backend 10.0.0.9`},
		{control.ActionUndrain, "nope", "10.0.0.1", `no rule "nope"`},
	} {
		_, err := o.ChangeBackend(context.Background(), control.BackendChange{Action: c.action, Rule: c.rule, Backend: c.backend})
		var e *control.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s %s %s: %v; want 400 %q", c.action, c.rule, c.backend, err, c.want)
		}
	}
}

// TestRestartOnly: a reload names every key it cannot apply while running
// and refuses them (docs/design.md#validation-and-reload); the live ones
// are not named.
func TestRestartOnly(t *testing.T) {
	base, _ := writeConfig(t, map[string]string{"web": webRule("", "[[group]]\nname = \"a\"\nbackends = [\"10.0.0.1\"]\n")})
	n := *base
	n.MetricsListen, n.HashSeed, n.MaglevTableSize, n.ControlSocketGroup = "127.0.0.1:1", 7, 131, "65534"
	if keys := restartOnly(base, &n); len(keys) != 0 {
		t.Errorf("live keys refused: %v", keys)
	}
	n.Interface, n.XDPMode, n.PinDir, n.ControlSocket, n.WorkerNice = "eth9", config.XDPGeneric, "/tmp/pins", "/tmp/other.sock", -5
	n.BusyPoll, n.BusyPollBudget = 50*time.Microsecond, 8
	n.Conntrack.MaxEntries, n.Conntrack.NewEntriesPerSecond, n.Conntrack.NewEntriesBurst, n.Conntrack.UnconfirmedIdle = 4096, 1, 2, 3
	want := "reload: interface, xdp_mode, pin_dir, control_socket, worker_nice, busy_poll, busy_poll_budget, conntrack.max_entries, conntrack.new_entries_per_second, conntrack.new_entries_burst, conntrack.unconfirmed_idle_timeout cannot change while running"
	if err := checkRestartOnly(base, &n); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
}

// TestGuardReload: without force, a reload that leaves no rule, or newly
// leaves a rule with only drained backends, is refused
// (docs/design.md#validation-and-reload).
func TestGuardReload(t *testing.T) {
	view := func(rules ...[]bool) *config.View {
		v := &config.View{}
		for i, drained := range rules {
			rv := config.RuleView{Rule: &config.Rule{Name: fmt.Sprintf("r%d", i)}}
			for j, d := range drained {
				rv.Backends = append(rv.Backends, config.BackendView{Addr: netip.AddrFrom4([4]byte{10, 0, byte(i), byte(j)}), Drained: d})
			}
			v.Rules = append(v.Rules, rv)
		}
		return v
	}
	for _, tc := range []struct {
		name     string
		old, new *config.View
		force    bool
		want     string // "" accepted
	}{
		{"fine", view([]bool{false, true}), view([]bool{false, true}, []bool{false}), false, ""},
		{"no rules", view([]bool{false}), view(), false, "the new configuration has no rules: all 1 rule(s) and their VIPs would stop"},
		{"no rules, forced", view([]bool{false}), view(), true, ""},
		{"nothing to start with", view(), view(), false, ""},
		{"only drained left", view([]bool{false, true}), view([]bool{true}), false, "rule r0 would keep only drained backends"},
		{"only drained left, forced", view([]bool{false, true}), view([]bool{true}), true, ""},
		{"was already so", view([]bool{true, true}), view([]bool{true}), false, ""},
	} {
		err := guardReload(tc.old, tc.new, tc.new.Prior(tc.old), tc.force)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "xlb reload --force")):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestRevivedOverrides: an override kept while its backend was out of the
// configuration is named when a reload brings the backend back
// (docs/design.md#the-state-overlay).
func TestRevivedOverrides(t *testing.T) {
	at := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	b := func(addr string, drained bool) config.BackendView {
		v := config.BackendView{Addr: netip.MustParseAddr(addr)}
		if drained {
			v.Drained, v.DrainedAt, v.DrainedSource = true, at, config.SourceCLI
		}
		return v
	}
	web := &config.Rule{Name: "web"}
	old := &config.View{Rules: []config.RuleView{{Rule: web, Backends: []config.BackendView{b("10.0.0.1", false)}}}}
	n := &config.View{Rules: []config.RuleView{{Rule: web, Backends: []config.BackendView{b("10.0.0.1", true), b("10.0.0.2", true), b("10.0.0.3", false)}}}}
	got := revivedOverrides(old, n, n.Prior(old))
	want := []string{"rule web backend 10.0.0.2 is back in the configuration and its CLI override applies again: drained since 2025-03-14 12:00:00 UTC (xlb backend reset -r web 10.0.0.2 removes it)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestHealthLogLevels: a backend turning UNHEALTHY is logged at WARN, one
// turning HEALTHY at INFO (docs/design.md#observability).
func TestHealthLogLevels(t *testing.T) {
	var buf strings.Builder
	d := &daemon{log: slog.New(slog.NewTextHandler(&buf, nil)), probes: map[probeKey]probe{}, pendingProbes: map[probeKey]probe{}}
	d.pendingProbes[probeKey{"web", addr("10.0.0.1")}] = probe{health: failover.HealthUnhealthy, lastError: "connection refused"}
	d.pendingProbes[probeKey{"web", addr("10.0.0.2")}] = probe{health: failover.HealthHealthy}
	if !d.applyProbes() {
		t.Fatal("no change applied")
	}
	var down, up string
	for _, line := range strings.Split(buf.String(), "\n") {
		switch {
		case strings.Contains(line, "backend=10.0.0.1"):
			down = line
		case strings.Contains(line, "backend=10.0.0.2"):
			up = line
		}
	}
	if !strings.Contains(down, "level=WARN msg=health") || !strings.Contains(down, "health=UNHEALTHY") {
		t.Errorf("unhealthy logged as %q; want WARN", down)
	}
	if !strings.Contains(up, "level=INFO msg=health") {
		t.Errorf("healthy logged as %q; want INFO", up)
	}
}

// TestForgetProbes: a reload forgets the verdicts of the backends that
// left a rule and of every backend of a rule that is gone, wherever the
// rules' files went, and keeps the others.
func TestForgetProbes(t *testing.T) {
	view := func(spec string) *config.View { // "file:rule:backend,backend …"
		v := &config.View{}
		for _, f := range strings.Fields(spec) {
			parts := strings.Split(f, ":")
			rv := config.RuleView{Rule: &config.Rule{File: parts[0], Name: parts[1]}}
			for _, a := range strings.Split(parts[2], ",") {
				rv.Backends = append(rv.Backends, config.BackendView{Addr: netip.MustParseAddr("10.0.0." + a)})
			}
			v.Rules = append(v.Rules, rv)
		}
		return v
	}
	old := view("a:a:1,2 b:b:3 c:c:4 d:d:5,6")
	n := view("a:a:1 b:b:3 e:d:6,7 f:f:8") // c gone, d moved to e and lost 5
	probes := map[probeKey]probe{}
	for _, k := range []string{"a/1", "a/2", "b/3", "c/4", "d/5", "d/6"} {
		name, a, _ := strings.Cut(k, "/")
		probes[probeKey{name, netip.MustParseAddr("10.0.0." + a)}] = probe{}
	}
	forgetProbes(func(k probeKey) { delete(probes, k) }, old, n, n.Prior(old))
	var left []string
	for k := range probes {
		left = append(left, k.rule+"/"+k.addr.String())
	}
	slices.Sort(left)
	if want := []string{"a/10.0.0.1", "b/10.0.0.3", "d/10.0.0.6"}; !slices.Equal(left, want) {
		t.Errorf("verdicts kept %v, want %v", left, want)
	}
}
