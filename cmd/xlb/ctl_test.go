package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
)

// fakeDaemon answers the control API like a daemon with one rule. It
// keeps the CLI overrides of each backend as the daemon's state overlay
// does, and shows them in its rows with source cli, so a test can check
// what a change did to the state rather than what a message says.
type fakeDaemon struct {
	mu        sync.Mutex
	changes   []control.BackendChange
	queries   []control.ConntrackQuery
	appliance []control.ApplianceAction
	overrides map[string]*fakeOverride // by backend address
}

// fakeOverride is one backend's overrides; nil fields are not set.
type fakeOverride struct {
	role    string
	drained bool
	weight  *int
}

func newFakeDaemon() *fakeDaemon {
	five := 5
	return &fakeDaemon{overrides: map[string]*fakeOverride{"192.0.2.2": {role: "failover", drained: true, weight: &five}}}
}

// backends are the rule's rows as the rule files make them, with the
// overrides laid over them.
func (f *fakeDaemon) backends() []control.Backend {
	f.mu.Lock()
	defer f.mu.Unlock()
	bs := []control.Backend{
		{Rule: "web", Address: "192.0.2.1", Role: "primary", RoleSource: "config", Admin: "IN_SERVICE", AdminSource: "config", Health: "HEALTHY", WeightConfigured: -1, WeightSource: "config", WeightEffective: 1, Share: 0.5, Eligible: true, Tier: "PRIMARY", Connections: 12, SessionEntries: 0, Packets: 100, PacketsPerSec: 42},
		{Rule: "web", Address: "192.0.2.2", Role: "primary", RoleSource: "config", Admin: "IN_SERVICE", AdminSource: "config", Health: "HEALTHY", WeightConfigured: -1, WeightSource: "config", Tier: "PRIMARY", Connections: -1, Packets: -1},
	}
	for i := range bs {
		o := f.overrides[bs[i].Address]
		if o == nil {
			continue
		}
		if o.role != "" {
			bs[i].Role, bs[i].RoleSource = o.role, "cli"
		}
		if o.drained {
			bs[i].Admin, bs[i].AdminSource = "DRAINED", "cli"
		}
		if o.weight != nil {
			bs[i].WeightConfigured, bs[i].WeightSource = *o.weight, "cli"
		}
	}
	return bs
}

func (f *fakeDaemon) Status(_ context.Context, q control.StatusQuery) (*control.Status, error) {
	if q.Rule != "" && q.Rule != "web" {
		return nil, control.BadRequest("no rule %q", q.Rule)
	}
	if q.Summary { // as the daemon answers: counts, no rule tables
		return &control.Status{Config: "/etc/xlb/xlb.toml", XDPMode: "native", Queues: []int{0, 1}, RulesSelected: 1,
			Summary: &control.StatusSummary{Rules: 1, Tiers: map[string]int{"PRIMARY": 1}, Backends: 2, Health: map[string]int{"HEALTHY": 2}}}, nil
	}
	return &control.Status{RulesSelected: 1, Config: "/etc/xlb/xlb.toml", XDPMode: "native", Queues: []int{0, 1}, Counters: control.Counters{RX: 1000, TX: 990, Drops: map[string]uint64{"no-rule": 10}},
		Rules: []control.Rule{{Name: "web", VIP: "203.0.113.10", Protocol: "TCP", Ports: "80", Tier: "PRIMARY", Eligible: 1, Reason: "1 of 2 primaries usable", Backends: f.backends()}},
		Stale: []string{"state.toml:7: override[1]: rule \"old\" is not in the configuration; override kept, not applied"}}, nil
}

func (f *fakeDaemon) Backends(_ context.Context, q control.StatusQuery) (control.RuleStream, error) {
	if q.Rule != "" && q.Rule != "web" {
		return nil, control.BadRequest("no rule %q", q.Rule)
	}
	return func(emit func(*control.Rule) error) error {
		return emit(&control.Rule{Name: "web", Backends: f.backends()})
	}, nil
}

func (f *fakeDaemon) ChangeBackend(_ context.Context, c control.BackendChange) (*control.BackendChangeResult, error) {
	f.mu.Lock()
	f.changes = append(f.changes, c)
	o := f.overrides[c.Backend]
	if o == nil {
		o = &fakeOverride{}
		f.overrides[c.Backend] = o
	}
	switch c.Action {
	case control.ActionMark:
		o.role = c.Role
	case control.ActionDrain:
		o.drained = true
	case control.ActionUndrain:
		o.drained = false
	case control.ActionWeight:
		w := *c.Weight
		o.weight = &w
	case control.ActionReset:
		delete(f.overrides, c.Backend)
	}
	f.mu.Unlock()
	res := &control.BackendChangeResult{Changed: true, Message: "changed"}
	for _, b := range f.backends() {
		if b.Address == c.Backend {
			res.Backend = b
		}
	}
	return res, nil
}

// override returns a copy of a backend's overrides (nil: none).
func (f *fakeDaemon) override(addr string) *fakeOverride {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o := f.overrides[addr]; o != nil {
		c := *o
		return &c
	}
	return nil
}

func (f *fakeDaemon) Reload(context.Context, control.ReloadRequest) (*control.ReloadResult, error) {
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
	f := newFakeDaemon()
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
		{[]string{"status", "--socket", sock, "--summary"}, []string{"rules: 1 (PRIMARY 1)", "backends of rules: 2 (HEALTHY 2)", "every rule serves from its PRIMARY tier", "xlb status --rule NAME"}},
		{[]string{"status", "--socket", sock, "--json", "--summary"}, []string{`"summary": {`, `"tiers": {`}},
		{[]string{"status", "--socket", sock, "--vip", "203.0.113.10"}, []string{"TCP 203.0.113.10 80  rule web", "-> 192.0.2.1"}},
		{[]string{"backend", "list", "-c", cfg, "--rule", "web"}, []string{"RULE", "VIP", "web   203.0.113.10", "192.0.2.2"}},
		{[]string{"backend", "list", "-c", cfg, "--json", "--vip", "203.0.113.10"}, []string{"[\n  {\n    \"rule\": \"web\",", `"address": "192.0.2.2"`, `"role_source": "cli"`}},
		{[]string{"backend", "list", "-c", cfg, "--summary"}, []string{"backends of 1 rules: 2 (HEALTHY 2)", "every rule serves from its PRIMARY tier", "xlb backend list --rule NAME"}},
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

// rowOf returns the line of a backend table that lists addr.
func rowOf(t *testing.T, out, addr string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, " "+addr+" ") {
			return l
		}
	}
	t.Fatalf("no row for %s in:\n%s", addr, out)
	return ""
}

// TestBackendChangeCommands: each change reaches the daemon as the request
// it names, changes the backend's state there, and the CLI prints the
// changed row; backend list then shows the change with source cli, and
// reset takes every override away again. The other backend's overrides
// stay.
func TestBackendChangeCommands(t *testing.T) {
	f, _, cfg := fakeSocket(t)
	run := func(args ...string) string {
		t.Helper()
		out, errOut, err := runXLB(t, append(args[:2:2], append([]string{"-c", cfg, "--rule", "web"}, args[2:]...)...)...)
		if err != nil {
			t.Fatalf("%v: %v (stderr %q)", args, err, errOut)
		}
		return out
	}
	cols := func(row string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(row, w) {
				t.Errorf("row %q lacks %q", row, w)
			}
		}
	}

	row := rowOf(t, run("backend", "mark", "--role", "failover", "192.0.2.1"), "192.0.2.1")
	cols(row, "failover (cli)", "IN_SERVICE (config)")
	if o := f.override("192.0.2.1"); o == nil || o.role != "failover" || o.weight != nil || o.drained {
		t.Errorf("after mark: override %+v, want role failover only", o)
	}

	row = rowOf(t, run("backend", "weight", "192.0.2.1", "7"), "192.0.2.1")
	cols(row, "failover (cli)", "7 (cli)")
	if o := f.override("192.0.2.1"); o == nil || o.weight == nil || *o.weight != 7 || o.role != "failover" {
		t.Errorf("after weight: override %+v, want weight 7 and role failover", o)
	}
	cols(rowOf(t, run("backend", "list"), "192.0.2.1"), "failover (cli)", "7 (cli)")

	row = rowOf(t, run("backend", "drain", "192.0.2.1"), "192.0.2.1")
	cols(row, "DRAINED (cli)", "7 (cli)")

	row = rowOf(t, run("backend", "reset", "192.0.2.1"), "192.0.2.1")
	cols(row, "primary (config)", "IN_SERVICE (config)", "  -  ")
	if o := f.override("192.0.2.1"); o != nil {
		t.Errorf("after reset: override %+v, want none", o)
	}
	list := run("backend", "list")
	cols(rowOf(t, list, "192.0.2.1"), "primary (config)", "IN_SERVICE (config)")
	if strings.Contains(rowOf(t, list, "192.0.2.1"), "(cli)") {
		t.Errorf("reset left a cli value: %q", rowOf(t, list, "192.0.2.1"))
	}
	cols(rowOf(t, list, "192.0.2.2"), "failover (cli)", "DRAINED (cli)", "5 (cli)")

	var actions []control.BackendAction
	for _, c := range f.changes {
		actions = append(actions, c.Action)
		if c.Rule != "web" || c.Backend != "192.0.2.1" {
			t.Errorf("change %+v: want rule web, backend 192.0.2.1", c)
		}
	}
	if want := []control.BackendAction{control.ActionMark, control.ActionWeight, control.ActionDrain, control.ActionReset}; !slices.Equal(actions, want) {
		t.Errorf("daemon got actions %v, want %v", actions, want)
	}
}

func TestControlUsageErrors(t *testing.T) {
	_, _, cfg := fakeSocket(t)
	for _, tc := range []struct {
		args []string
		want string // the whole message
	}{
		{[]string{"backend", "mark", "-c", cfg, "--rule", "web", "192.0.2.1"}, `--role "": want primary or failover`},
		{[]string{"backend", "mark", "-c", cfg, "--rule", "web", "--role", "spare", "192.0.2.1"}, `--role "spare": want primary or failover`},
		{[]string{"backend", "drain", "-c", cfg, "192.0.2.1"}, "drain: --rule is required"}, // urfave/cli's FullName of a subcommand is its own name,
		{[]string{"backend", "drain", "-c", cfg, "--rule", "web"}, "backend drain: want ADDR, got 0 argument(s)"},
		{[]string{"backend", "weight", "-c", cfg, "--rule", "web", "192.0.2.1", "heavy"}, `backend weight: "heavy" is not a weight in 0..1000`},
		{[]string{"backend", "weight", "-c", cfg, "--rule", "web", "192.0.2.1", "1001"}, `backend weight: "1001" is not a weight in 0..1000`},
		{[]string{"conntrack", "count", "-c", cfg, "--backend", "192.0.2.1"}, "conntrack count: --backend needs --rule"},
		{[]string{"conntrack", "list", "-c", cfg, "--limit", "0"}, "conntrack list: --limit 0: want at least 1"},
		{[]string{"lookup", "-c", cfg, "--rule", "web"}, "lookup: --src is required"},
		{[]string{"lookup", "-c", cfg, "--src", "198.51.100.7:1"}, "lookup: give --rule or --dst (the VIP)"},
		{[]string{"lookup", "-c", cfg, "--rule", "web", "--src", "198.51.100.7:1", "--dst-port", "70000"}, "--dst-port 70000: want 1..65535"},
		{[]string{"status", "-c", cfg, "extra"}, `status takes no arguments, got "extra"`},
		{[]string{"status", "-c", cfg, "--limit", "-1"}, "status: --limit and --offset must not be negative"},
		{[]string{"status", "-c", cfg, "--summary", "--all"}, "status: --summary and --all exclude each other"},
		{[]string{"simulate", "-c", cfg}, "simulate: give a change: --remove, --add, --weight or --role"},
		{[]string{"simulate", "-c", cfg, "--weight", "192.0.2.1"}, `--weight "192.0.2.1": want ADDR=N with N in 0..1000`},
		{[]string{"simulate", "-c", cfg, "--role", "192.0.2.1=spare"}, `--role "192.0.2.1=spare": want ADDR=primary or ADDR=failover`},
		{[]string{"simulate", "-c", cfg, "--remove", "backend-1"}, `--remove "backend-1": not an IP address`},
		{[]string{"simulate", "-c", cfg, "--remove", "192.0.2.1", "--flows", "-1"}, "--flows -1: want 0 or more"},
	} {
		_, _, err := runXLB(t, tc.args...)
		if err == nil || exitCode(err) != 2 || err.Error() != tc.want {
			t.Errorf("%v: %v (exit %d), want the usage error %q", tc.args, err, exitCode(err), tc.want)
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

// TestSimulateCommand: xlb simulate through the command line: removing 1 of
// 10 backends moves ~10 % of flows, all of them the removed backend's, and <
// 1 % of any other backend's share.
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

// TestBrokenConfigStillReachesDaemon: a syntax error in xlb.toml does not
// stop the CLI: it finds control_socket on its line (or the default),
// warns with the error in validate's file:line: form, and talks to the
// daemon — reload included, so the operator can still act during the
// incident.
func TestBrokenConfigStillReachesDaemon(t *testing.T) {
	f, _, cfg := fakeSocket(t)
	broken := "interface = \"eth0\"\ncontrol_socket = \"run/xlb.sock\"\nqueues = [0, 1\n[conntrack]\nmax_entries = 4096\n"
	if err := os.WriteFile(cfg, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runXLB(t, "status", "-c", cfg)
	if err != nil || !strings.Contains(out, "rule web") {
		t.Fatalf("status with a broken xlb.toml: %v %s\n%s", err, errOut, out)
	}
	if !strings.HasPrefix(errOut, "warning: xlb.toml:4: ") || !strings.Contains(errOut, "using control socket "+filepath.Join(filepath.Dir(cfg), "run", "xlb.sock")) {
		t.Errorf("status warned %q; want the syntax error as xlb.toml:LINE: and the socket it uses", errOut)
	}
	if _, errOut, err := runXLB(t, "backend", "drain", "-c", cfg, "-r", "web", "192.0.2.1"); err != nil {
		t.Errorf("drain with a broken xlb.toml: %v %s", err, errOut)
	}
	if o := f.override("192.0.2.1"); o == nil || !o.drained {
		t.Errorf("the drain did not reach the daemon")
	}
	// reload reaches the daemon (whose answer, here, is a rejection).
	_, errOut, err = runXLB(t, "reload", "-c", cfg)
	if err == nil || exitCode(err) != 1 || !strings.Contains(errOut, "error: rules.d/web.toml:14: failover.ratio") {
		t.Errorf("reload with a broken xlb.toml: %v %s; want the daemon's answer", err, errOut)
	}
}
