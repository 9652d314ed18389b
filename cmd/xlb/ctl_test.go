package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
)

// fakeDaemon answers the control API like a daemon with one rule.
type fakeDaemon struct {
	mu        sync.Mutex
	changes   []control.BackendChange
	queries   []control.ConntrackQuery
	appliance []control.ApplianceAction
}

func (f *fakeDaemon) backends() []control.Backend {
	return []control.Backend{
		{Rule: "web", Address: "192.0.2.1", Role: "primary", RoleSource: "config", Admin: "IN_SERVICE", AdminSource: "config", Health: "HEALTHY", WeightConfigured: -1, WeightEffective: 1, Share: 0.5, Eligible: true, Tier: "PRIMARY", Connections: 12, SessionEntries: 0, Packets: 100, PacketsPerSec: 42},
		{Rule: "web", Address: "192.0.2.2", Role: "failover", RoleSource: "cli", Admin: "DRAINED", AdminSource: "cli", Health: "HEALTHY", WeightConfigured: 5, WeightSource: "cli", Tier: "PRIMARY", Connections: -1, Packets: -1},
	}
}

func (f *fakeDaemon) Status(context.Context) (*control.Status, error) {
	return &control.Status{Config: "/etc/xlb/xlb.toml", XDPMode: "native", Queues: []int{0, 1}, Counters: control.Counters{RX: 1000, TX: 990, Drops: map[string]uint64{"no-rule": 10}},
		Rules: []control.Rule{{Name: "web", VIP: "203.0.113.10", Protocol: "TCP", Ports: "80", Tier: "PRIMARY", Eligible: 1, Reason: "1 of 2 primaries usable", Backends: f.backends()}},
		Stale: []string{"state.toml:7: override[1]: rule \"old\" is not in the configuration; override kept, not applied"}}, nil
}

func (f *fakeDaemon) Backends(_ context.Context, rule string) ([]control.Backend, error) {
	if rule != "" && rule != "web" {
		return nil, control.BadRequest("no rule %q", rule)
	}
	return f.backends(), nil
}

func (f *fakeDaemon) ChangeBackend(_ context.Context, c control.BackendChange) (*control.BackendChangeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, c)
	return &control.BackendChangeResult{Changed: true, Message: c.Backend + " of rule " + c.Rule + " " + string(c.Action), Backend: f.backends()[0]}, nil
}

func (f *fakeDaemon) Reload(context.Context) (*control.ReloadResult, error) {
	return nil, &control.Error{Status: http.StatusUnprocessableEntity, Message: "reload rejected; the running configuration keeps serving",
		Issues: []string{"rules.d/web.toml:14: failover.ratio: 1.5 is outside [0, 1]", "rules.d/web.toml:20: bogus: unknown key"}}
}

func (f *fakeDaemon) Conntrack(_ context.Context, q control.ConntrackQuery) (*control.ConntrackResult, error) {
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.mu.Unlock()
	return &control.ConntrackResult{Count: 3, Entries: []control.ConntrackRow{{Queue: 1, Rule: "web", Key: "TCP 198.51.100.7:40000 → 203.0.113.10:80", Backend: "192.0.2.1", ExpiresIn: "59s"}}}, nil
}

func (f *fakeDaemon) ChangeAppliance(_ context.Context, a control.ApplianceAction) (*control.ApplianceChangeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.appliance = append(f.appliance, a)
	return &control.ApplianceChangeResult{Changed: true, Message: "appliance " + string(a), Appliance: control.Appliance{Drained: a == control.ApplianceDrain}}, nil
}

func (f *fakeDaemon) Lookup(_ context.Context, q control.LookupQuery) (*control.LookupResult, error) {
	return &control.LookupResult{Rule: q.Rule, Flow: "TCP " + q.Src + " → 203.0.113.10:80 (established)", SelectionKey: "TCP " + q.Src + " → 203.0.113.10:80", SelectionHash: "0x1",
		TrackingKey: "TCP " + q.Src + " → 203.0.113.10:80", Trackable: true, EntryChecked: true, Tier: "PRIMARY", Eligible: 2, MaglevSlot: 17, MaglevBackend: "192.0.2.1",
		Verdict: "TX", Backend: "192.0.2.1", Why: "no tracked entry: new flow, Maglev slot 17 of 65537 → 192.0.2.1"}, nil
}

// fakeSocket serves a fakeDaemon on a socket named in a config file.
func fakeSocket(t *testing.T) (*fakeDaemon, string, string) {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "xlb.sock")
	f := &fakeDaemon{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- control.Serve(ctx, sock, control.NewHandler(f)) }()
	t.Cleanup(func() { cancel(); <-done })
	for i := 0; ; i++ {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if i > 200 {
			t.Fatal("fake control socket never came up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cfg := filepath.Join(dir, "xlb.toml")
	// Relative to the configuration's directory, as the daemon resolves it.
	os.WriteFile(cfg, []byte("interface = \"eth0\"\ncontrol_socket = \"run/xlb.sock\"\n[conntrack]\nmax_entries = 4096\n"), 0o644)
	return f, sock, cfg
}

func TestControlCommands(t *testing.T) {
	f, sock, cfg := fakeSocket(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"status", "-c", cfg}, []string{"TCP 203.0.113.10 80  rule web", "tier PRIMARY: 1 eligible", "-> 192.0.2.1", "primary (config)", "IN_SERVICE (config)", "50.0%", "yes, PRIMARY", "42", "DRAINED (cli)", "5 (cli)", "no-rule 10", "not applied"}},
		{[]string{"status", "--socket", sock, "--json"}, []string{`"rx_packets": 1000`, `"role_source": "cli"`}},
		{[]string{"backend", "list", "-c", cfg, "--rule", "web"}, []string{"RULE", "VIP", "web   203.0.113.10", "192.0.2.2"}},
		{[]string{"backend", "mark", "-c", cfg, "--rule", "web", "--role", "failover", "192.0.2.1"}, []string{"192.0.2.1 of rule web mark"}},
		{[]string{"backend", "weight", "-c", cfg, "--rule", "web", "192.0.2.1", "7"}, []string{"weight"}},
		{[]string{"backend", "reset", "-c", cfg, "--rule", "web", "192.0.2.1"}, []string{"reset"}},
		{[]string{"conntrack", "list", "-c", cfg, "--rule", "web", "--backend", "192.0.2.1"}, []string{"TCP 198.51.100.7:40000 → 203.0.113.10:80", "1 of 3 entries shown"}},
		{[]string{"conntrack", "count", "-c", cfg}, []string{"3"}},
		{[]string{"conntrack", "flush", "-c", cfg, "--rule", "web"}, []string{"flushed 3 entries"}},
		{[]string{"lookup", "-c", cfg, "--rule", "web", "--src", "198.51.100.7:40000"}, []string{"selection key", "tracking key", "tracked entry  none", "maglev slot    17 → 192.0.2.1", "backend        192.0.2.1 (TX)", "why"}},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			out, errOut, err := runXLB(t, tc.args...)
			if err != nil {
				t.Fatalf("%v (stderr %q)", err, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	if len(f.changes) != 3 || f.changes[0].Role != "failover" || *f.changes[1].Weight != 7 || f.changes[2].Action != "reset" {
		t.Errorf("daemon got %+v", f.changes)
	}
	if q := f.queries[0]; q.Op != "list" || q.Rule != "web" || q.Backend != "192.0.2.1" || q.Limit != 1000 {
		t.Errorf("conntrack list reached the daemon as %+v", q)
	}

	// A rejected reload prints every issue and exits 1.
	_, errOut, err := runXLB(t, "reload", "-c", cfg)
	if err == nil || exitCode(err) != 1 || !strings.Contains(errOut, "error: rules.d/web.toml:14: failover.ratio: 1.5 is outside [0, 1]") || !strings.Contains(err.Error(), "2 error(s)") {
		t.Errorf("reload: %v, stderr %q", err, errOut)
	}
	// The daemon's refusal is one line, exit 1.
	_, _, err = runXLB(t, "backend", "list", "-c", cfg, "--rule", "nope")
	if err == nil || exitCode(err) != 1 || err.Error() != `no rule "nope"` {
		t.Errorf("unknown rule: %v", err)
	}
}

func TestControlUsageErrors(t *testing.T) {
	_, _, cfg := fakeSocket(t)
	for _, args := range [][]string{
		{"backend", "mark", "-c", cfg, "--rule", "web", "192.0.2.1"},                    // no --role
		{"backend", "mark", "-c", cfg, "--rule", "web", "--role", "spare", "192.0.2.1"}, // bad role
		{"backend", "drain", "-c", cfg, "192.0.2.1"},                                    // no --rule
		{"backend", "drain", "-c", cfg, "--rule", "web"},                                // no address
		{"backend", "weight", "-c", cfg, "--rule", "web", "192.0.2.1", "heavy"},         // not a number
		{"backend", "weight", "-c", cfg, "--rule", "web", "192.0.2.1", "1001"},          // out of range
		{"conntrack", "count", "-c", cfg, "--backend", "192.0.2.1"},                     // backend without rule
		{"lookup", "-c", cfg, "--rule", "web"},                                          // no --src
		{"status", "-c", cfg, "extra"},                                                  // argument
		{"simulate", "-c", cfg},                                                         // no change
		{"simulate", "-c", cfg, "--weight", "192.0.2.1"},                                // no =N
		{"simulate", "-c", cfg, "--role", "192.0.2.1=spare"},                            // bad role
		{"simulate", "-c", cfg, "--remove", "backend-1"},                                // not an address
	} {
		_, _, err := runXLB(t, args...)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("%v: %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
	// No daemon: one clear line, exit 1.
	_, _, err := runXLB(t, "status", "--socket", filepath.Join(t.TempDir(), "none.sock"))
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "is xlb running?") {
		t.Errorf("no daemon: %v", err)
	}
	_, _, err = runXLB(t, "status", "-c", filepath.Join(t.TempDir(), "missing.toml"))
	if err == nil || !strings.Contains(err.Error(), "--socket") {
		t.Errorf("missing configuration: %v", err)
	}
}

// TestSimulateCommand: the acceptance of issue 5 through the command
// line: removing 1 of 10 backends moves ~10 % of flows, all of them the
// removed backend's, and < 1 % of any other backend's share.
func TestSimulateCommand(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "rules.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "xlb.toml"), []byte(fmt.Sprintf("interface = \"eth0\"\nhash_seed = \"0x1234\"\nstate_file = %q\n", filepath.Join(dir, "state.toml"))), 0o644)
	var bs []string
	for i := 1; i <= 10; i++ {
		bs = append(bs, fmt.Sprintf("%q", fmt.Sprintf("192.0.2.%d", i)))
	}
	os.WriteFile(filepath.Join(dir, "rules.d", "web.toml"), []byte("name = \"web\"\nvip = \"203.0.113.10\"\nports = [\"80\"]\n[health_check]\ntype = \"TCP\"\nport = 80\n[[group]]\nname = \"a\"\nbackends = ["+strings.Join(bs, ", ")+"]\n"), 0o644)
	out, errOut, err := runXLB(t, "simulate", "-c", filepath.Join(dir, "xlb.toml"), "--remove", "192.0.2.7", "--flows", "50000")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	t.Logf("\n%s", out)
	var removed, survivors int
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[0], "192.0.2.") {
			continue
		}
		var away float64
		col := 3
		if f[1] == "(leaves)" {
			col = 4
		}
		fmt.Sscanf(strings.TrimSuffix(f[col], "%"), "%g", &away)
		if f[0] == "192.0.2.7" {
			removed++
			if away < 9 || away > 11 {
				t.Errorf("removed backend: %.2f%% of flows moved, want ~10%%: %q", away, line)
			}
		} else {
			survivors++
			if away >= 1 {
				t.Errorf("survivor: %.2f%% of flows moved, want < 1%%: %q", away, line)
			}
		}
	}
	if removed != 1 || survivors != 9 {
		t.Errorf("found %d removed and %d surviving backend rows in:\n%s", removed, survivors, out)
	}
	if !strings.Contains(out, "sampled: ") {
		t.Errorf("no sampled flows line:\n%s", out)
	}
}

// TestApplianceCommands: drain and undrain reach the daemon as typed
// actions and print its answer; extra arguments are usage errors.
func TestApplianceCommands(t *testing.T) {
	f, sock, cfg := fakeSocket(t)
	out, errOut, err := runXLB(t, "appliance", "drain", "-c", cfg)
	if err != nil || !strings.Contains(out, "appliance drain") || !strings.Contains(out, "appliance: DRAINED") {
		t.Errorf("drain: %v %q %q", err, out, errOut)
	}
	out, _, err = runXLB(t, "appliance", "undrain", "--socket", sock, "--json")
	if err != nil || !strings.Contains(out, `"changed": true`) || !strings.Contains(out, `"drained": false`) {
		t.Errorf("undrain --json: %v %q", err, out)
	}
	if len(f.appliance) != 2 || f.appliance[0] != control.ApplianceDrain || f.appliance[1] != control.ApplianceUndrain {
		t.Errorf("daemon got %v", f.appliance)
	}
	if _, _, err := runXLB(t, "appliance", "drain", "-c", cfg, "now"); err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "takes no arguments") {
		t.Errorf("extra argument: %v", err)
	}
	for _, sub := range []string{"drain", "undrain"} {
		out, _, err := runXLB(t, "appliance", sub, "--help")
		if err != nil || !strings.Contains(out, "--socket") || !strings.Contains(out, "--json") {
			t.Errorf("appliance %s --help: %v %q", sub, err, out)
		}
	}
}
