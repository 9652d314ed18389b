package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/handover"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// Lab tests of what a new operator ran into on a first day with xlb, one
// lab for the checks that can share one.

// quickest returns the shortest of n back-to-back calls of f.
func quickest(t *testing.T, n int, what string, f func() error) time.Duration {
	t.Helper()
	best := time.Hour
	for range n {
		start := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		best = min(best, time.Since(start))
	}
	return best
}

// webLab builds a lab with o and runs xlb on it with one rule, web4 (IPIP,
// health checks off), its files in dir.
func webLab(t *testing.T, o lab.Options) (l *lab.Lab, rules []lab.Rule, dir, sock string, x *labXLB) {
	t.Helper()
	l = labWith(t, o)
	rules = l.DefaultRules("IPIP")[:1]
	rules[0].Health = healthNone
	dir = t.TempDir()
	x, sock = startOps(t, l, dir, rules)
	return l, rules, dir, sock, x
}

// driveInBackground drives HTTP requests from the client until the
// returned stop is called (and waits for the last batch).
func driveInBackground(ctx context.Context, l *lab.Lab, batch int) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			l.Drive(ctx, lab.DriveOptions{Requests: batch, Family: 4, Concurrency: 8})
		}
	}()
	return func() { close(quit); <-done }
}

// drainVia drains backend addr of rule through the control socket.
func drainVia(t *testing.T, sock, rule string, addr netip.Addr) {
	t.Helper()
	if _, errOut, err := xlbCtl(t, sock, 2, "backend", "drain", "-r", rule, addr.String()); err != nil {
		t.Fatalf("drain %s: %v %s", addr, err, errOut)
	}
}

// TestStatusRatesAndLatency: rates come from the daemon's 2 s estimator
// and say so (item 5): 0 one window after traffic stopped, whatever the
// time since the previous call; and the read commands answer at once
// (item 19: status slept 500 ms, backend list and conntrack count walked
// the tables 256 slots per idle millisecond).
func TestStatusRatesAndLatency(t *testing.T) {
	testutil.RequireRoot(t)
	l, _, _, sock, _ := webLab(t, lab.Options{Backends: 2, ClientAddrs: 100})
	cl := control.NewClient(sock)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Traffic for a few windows; a status during it sees a rate.
	stop := driveInBackground(ctx, l, 100)
	testutil.WaitFor(t, 20*time.Second, "a packet rate during traffic", func() (bool, string) {
		st, err := cl.Status(ctx, control.StatusQuery{})
		if err != nil {
			return false, err.Error()
		}
		return st.Counters.RXPerSec > 0 && st.Rates.WindowSeconds == 2 && st.Rates.Seconds > 1.5 && st.Rates.Seconds < 3,
			fmt.Sprintf("%+v rx %.0f/s", st.Rates, st.Counters.RXPerSec)
	})
	stop()
	stopped := time.Now()
	out, _, err := xlbCtl(t, sock, 1, "status")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("status at the end of the traffic:\n%s", out)

	// Two windows and a bit later the rate is 0: the previous call was
	// during the traffic, which an average since the previous call would
	// still count.
	time.Sleep(time.Until(stopped.Add(5 * time.Second)))
	st, err := cl.Status(ctx, control.StatusQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Counters.RXPerSec != 0 || st.Rates.WindowSeconds != 2 {
		t.Errorf("5 s after traffic stopped: rx %v/s over %+v; want 0/s over a 2 s window", st.Counters.RXPerSec, st.Rates)
	}
	for _, r := range st.Rules {
		for _, b := range r.Backends {
			if b.PacketsPerSec != 0 || b.Packets <= 0 {
				t.Errorf("5 s after traffic stopped: backend %s %v packets, %v/s; want packets and 0/s", b.Address, b.Packets, b.PacketsPerSec)
			}
		}
	}
	out, _, _ = xlbCtl(t, sock, 1, "status")
	t.Logf("status 5 s later:\n%s", out)

	// Read commands: the quickest of five back-to-back calls (a loaded
	// machine may slow one) is well under 100 ms.
	for _, c := range []struct {
		what string
		f    func() error
	}{
		{"status", func() error { _, err := cl.Status(ctx, control.StatusQuery{}); return err }},
		{"backend list", func() error { _, err := cl.Backends(ctx, control.StatusQuery{}); return err }},
		{"conntrack count", func() error {
			_, err := cl.Conntrack(ctx, control.ConntrackQuery{Op: control.ConntrackCount})
			return err
		}},
	} {
		d := quickest(t, 5, c.what, c.f)
		t.Logf("%s: %v", c.what, d)
		if d > 100*time.Millisecond {
			t.Errorf("%s took %v at best of 5; want well under 100 ms", c.what, d)
		}
	}
}

// TestLabQueues: the default lab runs xlb in native XDP mode with both
// queues receiving, and status shows packets per queue without a warning;
// a jumbo fabric makes xlb fall back to generic mode, log why, and warn
// that queue 1 stays idle under load (docs/design.md#observability).
func TestLabQueues(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tc := range []struct {
		name    string
		mtu     int
		mode    string
		logWant []string
	}{
		{"default", 0, "native", nil},
		{"jumbo", 9000, "generic", []string{"native XDP refused: running in generic mode", "MTU 9000 exceeds one page per frame"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _, _, sock, x := webLab(t, lab.Options{Backends: 2, ClientAddrs: 200, FabricMTU: tc.mtu})
			for _, w := range tc.logWant {
				if !strings.Contains(x.log.String(), w) {
					t.Errorf("xlb's log lacks %q:\n%s", w, x.log)
				}
			}
			cl := control.NewClient(sock)
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			defer driveInBackground(ctx, l, 200)()
			var st *control.Status
			testutil.WaitFor(t, 20*time.Second, "a full window under load", func() (bool, string) {
				var err error
				if st, err = cl.Status(ctx, control.StatusQuery{}); err != nil {
					return false, err.Error()
				}
				return st.Counters.RXPerSec > 200, fmt.Sprintf("%.0f/s %+v", st.Counters.RXPerSec, st.QueueStats)
			})
			out, _, _ := xlbCtl(t, sock, 1, "status")
			t.Logf("status:\n%s", out)
			if st.XDPMode != tc.mode || len(st.QueueStats) != 2 {
				t.Fatalf("xdp mode %s with %d queue rows; want %s with 2", st.XDPMode, len(st.QueueStats), tc.mode)
			}
			idle := strings.Contains(strings.Join(st.Warnings, "\n"), "queue 1 received nothing")
			if !strings.Contains(out, "queues: 0 rx ") {
				t.Errorf("status prints no per-queue packets")
			}
			switch tc.mode {
			case "native":
				for _, q := range st.QueueStats {
					if q.RXPackets == 0 {
						t.Errorf("queue %d received nothing in native mode: %+v", q.Queue, st.QueueStats)
					}
				}
				if len(st.Warnings) > 0 {
					t.Errorf("warnings in native mode: %q", st.Warnings)
				}
			case "generic":
				if st.QueueStats[1].RXPackets != 0 || !idle || !strings.Contains(out, "warning: queue 1 received nothing") {
					t.Errorf("generic mode: queue 1 has %d packets, warnings %q; want none and the idle warning", st.QueueStats[1].RXPackets, st.Warnings)
				}
			}
		})
	}
}

// TestStartupHerd: until every backend has its first health verdict, a rule
// serves from its start-up set (all backends), not from the first backend
// that passed; when the last verdict arrives it switches once
// (docs/design.md#health-checks). be1 and be2 fail their checks at start with
// an unhealthy threshold of 10, so they stay without a verdict while be0
// passes: before the fix be0 took every new connection. Then xlb restart
// carries the verdicts, and the successor's probers go on from them.
func TestStartupHerd(t *testing.T) {
	testutil.RequireRoot(t)
	l := labWith(t, lab.Options{Backends: 3, ClientAddrs: 150})
	rules := l.DefaultRules("IPIP")[:1]
	rules[0].Health = fmt.Sprintf("type = \"HTTP\"\nport = %d\nrequest_path = \"/healthz\"\ninterval = \"1s\"\ntimeout = \"1s\"\nhealthy_threshold = 2\nunhealthy_threshold = 10\n", l.Opts.HealthPort)
	l.Backends[1].SetHealthy(false)
	l.Backends[2].SetHealthy(false)
	x, sock := startOps(t, l, t.TempDir(), rules)

	// be0 passes within a second or two; the rule is not warm.
	testutil.WaitFor(t, 10*time.Second, "be0's first verdict", func() (bool, string) {
		b := backendOf(statusJSON(t, sock), "web4", "198.18.1.100")
		return b.Health == "HEALTHY", b.Health + " " + b.HealthDetail
	})
	st := statusJSON(t, sock)
	r := st.Rules[0]
	if r.FirstChecksDone || r.Tier != "LAST_RESORT" || r.Eligible != 3 || !strings.Contains(r.Reason, "start-up set") {
		t.Fatalf("with be1 and be2 still unchecked: first checks done %v, tier %s, %d eligible (%s); want the start-up set of 3", r.FirstChecksDone, r.Tier, r.Eligible, r.Reason)
	}
	res := drive(t, l, 150, 4)
	t.Logf("while warming up: %v", res.PerBackend)
	for i, n := range res.PerBackend {
		if n < 20 {
			t.Errorf("while warming up be%d served %d of 150: %v; want every backend to share new connections", i, n, res.PerBackend)
		}
	}

	// The last verdicts arrive: one switch to PRIMARY with all three.
	l.Backends[1].SetHealthy(true)
	l.Backends[2].SetHealthy(true)
	testutil.WaitFor(t, 15*time.Second, "the rule warm", func() (bool, string) {
		r := statusJSON(t, sock).Rules[0]
		return r.FirstChecksDone && r.Tier == "PRIMARY" && r.Eligible == 3, fmt.Sprintf("%v %s %d %s", r.FirstChecksDone, r.Tier, r.Eligible, r.Reason)
	})
	var switches []string
	for _, e := range statusJSON(t, sock).Events {
		if e.Kind == "TIER_SWITCH" {
			switches = append(switches, e.From+"→"+e.To)
		}
	}
	if strings.Join(switches, " ") != "NONE→LAST_RESORT LAST_RESORT→PRIMARY" {
		t.Errorf("tier switches %v; want the start-up set, then one switch", switches)
	}

	// xlb restart carries the verdicts: the successor starts warm, on the
	// set they give, with no start-up set again.
	restarted := time.Now()
	if _, err := restartXLB(t, x, "restart"); err != nil {
		t.Fatalf("xlb restart: %v", err)
	}
	// The first answer of the successor (a request racing the cut-over
	// may meet the predecessor's closing server).
	testutil.WaitFor(t, 10*time.Second, "the successor's status", func() (bool, string) {
		out, errOut, err := xlbCtl(t, sock, 1, "status", "--json")
		if err != nil {
			return false, err.Error() + errOut
		}
		var st control.Status
		err = json.Unmarshal([]byte(out), &st)
		if err == nil && len(st.Rules) == 1 {
			r = st.Rules[0]
		}
		return err == nil, fmt.Sprint(err)
	})
	if !r.FirstChecksDone || r.Tier != "PRIMARY" || r.Eligible != 3 {
		t.Errorf("right after xlb restart: first checks done %v, tier %s, %d eligible (%s); want warm, PRIMARY, 3", r.FirstChecksDone, r.Tier, r.Eligible, r.Reason)
	}
	// And keeps them while the successor's probers pass (two intervals
	// and more): they start from the carried verdicts. From UNKNOWN, each
	// first pass reported its weight with the health still UNKNOWN
	// (healthy_threshold 2), which replaced the carried HEALTHY and took
	// the backend out of the rule until the next probe.
	if b := statusJSON(t, sock).Build; !b.Started.After(restarted) || b.UptimeSeconds > 60 {
		t.Errorf("the successor says it started %v, up %.0f s; want after the restart began (%v)", b.Started, b.UptimeSeconds, restarted)
	}
	for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); time.Sleep(150 * time.Millisecond) {
		st := statusJSON(t, sock)
		if r := st.Rules[0]; r.Tier != "PRIMARY" || r.Eligible != 3 {
			t.Fatalf("after xlb restart: tier %s, %d eligible (%s); want PRIMARY, 3 throughout", r.Tier, r.Eligible, r.Reason)
		}
		for _, e := range st.Events {
			if e.Kind == "health" && e.To != "HEALTHY" && e.At.After(restarted) {
				t.Fatalf("after xlb restart: health event %s %s → %s; want none", e.Backend, e.From, e.To)
			}
		}
	}
	stopDaemon(t, l, x) // the successor (x's process handed over to it)
}

// TestLabDemoWaitsForHealth runs `xlb lab demo`: it waits until every rule
// finished its first round of health checks before driving, so the shares
// it prints are the balance, not the start-up herd (the demo once printed
// 45/32/22 % of 3000 connections).
func TestLabDemoWaitsForHealth(t *testing.T) {
	testutil.RequireRoot(t)
	prefix := testutil.Unique("dw") + "-"
	out, errOut, err := runXLB(t, "lab", "demo", "--prefix", prefix, "--requests", "900", "--clients", "300")
	if left := lab.Namespaces(prefix); len(left) != 0 {
		lab.Down(prefix)
		t.Errorf("demo left %v", left)
	}
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	t.Logf("xlb lab demo:\n%s", out)
	healthy := strings.Index(out, "every rule healthy: ")
	driving := strings.Index(out, "driving 900 HTTP requests")
	if healthy < 0 || driving < healthy {
		t.Fatalf("the demo did not wait for healthy rules before driving:\n%s", out)
	}
	shares := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 5 && strings.HasPrefix(f[0], "be") && strings.HasSuffix(f[4], "%") {
			var pct float64
			fmt.Sscanf(strings.TrimSuffix(f[4], "%"), "%g", &pct)
			shares++
			if pct < 25 || pct > 42 {
				t.Errorf("%s carried %.1f%% of the requests; want 25-42%% of 3 backends", f[0], pct)
			}
		}
	}
	if shares != 3 {
		t.Errorf("found %d backend shares in the output, want 3", shares)
	}
}

// TestLookupFindsRule: lookup finds the rule the packet matches (no --rule),
// and a packet to the VIP that no rule claims is DROPped as no-rule, as the
// workers do with unmatched_vip_traffic = "drop", the default
// (docs/design.md#rules-and-vips): the XDP program sends every packet to a
// VIP address to xlb, which counts what no rule claims.
func TestLookupFindsRule(t *testing.T) {
	testutil.RequireRoot(t)
	l, _, _, sock, _ := webLab(t, lab.Options{Backends: 2, ClientAddrs: 20})
	lookup := func(args ...string) control.LookupResult {
		t.Helper()
		out, errOut, err := xlbCtl(t, sock, 1, append([]string{"lookup", "--json"}, args...)...)
		if err != nil {
			t.Fatalf("lookup %v: %v %s", args, err, errOut)
		}
		var r control.LookupResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("lookup %v: %v\n%s", args, err, out)
		}
		return r
	}
	src := netip.AddrPortFrom(l.ClientAddrs4[0], 40000).String()
	vip := l.Opts.VIP4.String()
	if r := lookup("--src", src, "--dst", vip, "--dst-port", "80"); r.Rule != "web4" || r.Verdict != "TX" {
		t.Errorf("port 80 without --rule: %+v; want rule web4, TX", r)
	}
	r := lookup("--src", src, "--dst", vip, "--dst-port", "8081")
	if r.Verdict != "DROP" || r.Rule != "" || !strings.Contains(r.Why, "dropped and counted as no-rule") {
		t.Errorf("port 8081: %+v; want DROP (no-rule)", r)
	}
	if r := lookup("--rule", "web4", "--src", src, "--dst-port", "8081"); r.Verdict != "DROP" {
		t.Errorf("port 8081 of rule web4: %+v; want DROP", r)
	}
	if r := lookup("--src", src, "--dst", "203.0.113.99", "--dst-port", "80"); r.Verdict != "PASS" {
		t.Errorf("a destination that is no VIP: %+v; want PASS (the XDP program leaves it to the kernel)", r)
	}
	out, _, _ := xlbCtl(t, sock, 1, "lookup", "--src", src, "--dst", vip, "--dst-port", "8081")
	t.Logf("xlb lookup … --dst-port 8081:\n%s", out)

	// xlbctl (this package built with -tags xlbctl) asks the same and
	// prints the same, as a table and as JSON.
	ctl := buildXlbctl(t)
	for _, args := range [][]string{
		{"lookup", "--src", src, "--dst", vip, "--dst-port", "8081"},
		{"lookup", "--json", "--src", src, "--dst", vip, "--dst-port", "80"},
		{"lookup", "--rule", "web4", "--src", src, "--syn"},
	} {
		want, _, err := xlbCtl(t, sock, 1, args...)
		if err != nil {
			t.Fatalf("xlb %v: %v", args, err)
		}
		got, errOut, code := runBinary(t, ctl, append([]string{args[0], "--socket", sock}, args[1:]...)...)
		if code != 0 || got != want {
			t.Errorf("xlbctl %v (exit %d, %s):\n%s\nxlb's:\n%s", args, code, errOut, got, want)
		}
	}

	// What the workers do: SYNs to port 8081 reach xlb and are counted.
	before := statusJSON(t, sock).Counters
	l.Client.Do(func() error {
		for i := range 5 {
			d := net.Dialer{Timeout: 300 * time.Millisecond, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(l.ClientAddrs4[i], 0))}
			if c, err := d.Dial("tcp", netip.AddrPortFrom(l.Opts.VIP4, 8081).String()); err == nil {
				c.Close()
				t.Errorf("a connection to port 8081 from %s was answered", l.ClientAddrs4[i])
			}
		}
		return nil
	})
	var after control.Counters
	testutil.WaitFor(t, 5*time.Second, "5 SYNs to port 8081 counted as no-rule", func() (bool, string) {
		after = statusJSON(t, sock).Counters
		return after.Drops["no-rule"] >= before.Drops["no-rule"]+5, fmt.Sprintf("no-rule drops %d → %d", before.Drops["no-rule"], after.Drops["no-rule"])
	})
	if res := drive(t, l, 20, 4); !res.OK() {
		t.Errorf("port 80 beside the dropped port: %v", res)
	}
}

// plainVethConfig writes a configuration for interface plain0 with queues
// (a TOML value) and one rule with health checks off, and returns its path.
func plainVethConfig(t *testing.T, dir, queues string) string {
	t.Helper()
	os.MkdirAll(filepath.Join(dir, "rules.d"), 0o755)
	main := fmt.Sprintf("interface = \"plain0\"\nqueues = %s\nhash_seed = \"0x1\"\nstate_file = %q\ncontrol_socket = %q\nmetrics_listen = \"\"\n[conntrack]\nmax_entries = 4096\n",
		queues, filepath.Join(dir, "state.toml"), filepath.Join(dir, "xlb.sock"))
	rule := "vip = \"203.0.113.10\"\nports = [\"80\"]\n[health_check]\ntype = \"NONE\"\n[[group]]\nname = \"a\"\nbackends = [\"198.18.0.100\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "xlb.toml"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.d", "web.toml"), []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "xlb.toml")
}

// TestRunOnPlainVeth: queues = "all" binds the queues a plain veth uses
// (one) instead of those it allocates (one per CPU: queue 1 failed with
// "bind … invalid argument"); a list beyond them stops xlb run before it
// attaches anything, naming the problem (docs/design.md#the-appliance-file).
func TestRunOnPlainVeth(t *testing.T) {
	ns := plainVeth(t)
	x, err := plainXLB(t, ns, "")
	if err != nil {
		t.Fatalf("queues = \"all\" on a plain veth: %v", err)
	}
	if !strings.Contains(x.log.String(), "msg=serving rules=1 queues=[0] ") {
		t.Errorf("xlb does not serve queue 0 alone:\n%s", x.log)
	}
	if err := x.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	_, err = runLabXLB(ctx, ns.Name, dir, plainVethConfig(t, dir, "[0, 1]"), func(s string) { t.Log(s) })
	if err == nil || !strings.Contains(err.Error(), "xlb.toml:2: queues: interface plain0 has 1 active receive queue(s), 0-0 (ethtool channels): queue 1 cannot be served") {
		t.Errorf("queues = [0, 1] on a plain veth: %v", err)
	}
}

// TestWorkerNice: the worker threads run at worker_nice, and at the
// daemon's own priority by default (every thread at 0).
func TestWorkerNice(t *testing.T) {
	ns := plainVeth(t)
	for _, nice := range []int{0, -7} {
		x, err := plainXLB(t, ns, fmt.Sprintf("worker_nice = %d\n", nice))
		if err != nil {
			t.Fatal(err)
		}
		nices := threadNices(t, x.cmd.Process.Pid)
		if err := x.Stop(); err != nil {
			t.Fatal(err)
		}
		at := 0
		for _, n := range nices {
			if n == nice {
				at++
			}
		}
		// One served queue: one worker at nice; every other thread at 0.
		want := 1
		if nice == 0 {
			want = len(nices)
		}
		if at != want {
			t.Errorf("worker_nice = %d: thread nice values %v, want %d at %d", nice, nices, want, nice)
		}
	}
}

// plainXLB starts xlb on plainVeth's plain0 with queues = "all" and the
// top-level lines top before plainVethConfig's.
func plainXLB(t *testing.T, ns *netns.NS, top string) (*labXLB, error) {
	t.Helper()
	dir := t.TempDir()
	cfg := plainVethConfig(t, dir, `"all"`)
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, append([]byte(top), text...), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return runLabXLB(ctx, ns.Name, dir, cfg, func(s string) { t.Log(s) })
}

// threadNices returns the nice value of each thread of process pid.
func threadNices(t *testing.T, pid int) []int {
	t.Helper()
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	var nices []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // a thread that ended
		}
		// The fields after the command's closing parenthesis: state is
		// field 3, nice field 19.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		n, err := strconv.Atoi(f[19-3])
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		nices = append(nices, n)
	}
	return nices
}

// plainVeth makes a namespace with the veth pair plain0-plain1, up.
func plainVeth(t *testing.T) *netns.NS {
	ns := testutil.NewNetNS(t, "pv")
	err := ns.Do(func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "plain0"}, PeerName: "plain1"}); err != nil {
			return err
		}
		for _, n := range []string{"plain0", "plain1"} {
			l, err := netlink.LinkByName(n)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestLabUpPrintsRunLine: `xlb lab up` without --xlb writes a ready
// configuration and prints the line that runs xlb on it; running that line
// serves every rule; zero counts are refused; Ctrl-C removes the lab
// (docs/design.md#command-line).
func TestLabUpPrintsRunLine(t *testing.T) {
	testutil.RequireRoot(t)
	for _, args := range [][]string{{"--backends", "0"}, {"--clients", "0"}, {"--queues", "-1"}, {"--fabric-mtu", "0"}} {
		_, _, err := runXLB(t, append([]string{"lab", "up", "--prefix", "never-"}, args...)...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), args[0]+" "+args[1]+": want ") {
			t.Errorf("lab up %v: %v (exit %d); want a usage error", args, err, exitCode(err))
		}
	}
	prefix := testutil.Unique("lu") + "-"
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	up := exec.Command(self, "lab", "up", "--prefix", prefix, "--backends", "2", "--clients", "20")
	up.Env = append(os.Environ(), runMainEnv+"=1")
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		up.Process.Signal(syscall.SIGINT)
		up.Wait()
		lab.Down(prefix)
	})
	var out strings.Builder
	var cfg string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if f := strings.Fields(line); len(f) == 12 && strings.HasPrefix(line, "run xlb on it:") && f[4] == "ip" && f[7] == prefix+"xlb" && f[9] == "run" {
			cfg = f[11]
		}
		if strings.Contains(line, "Ctrl-C tears it down") {
			break
		}
	}
	t.Logf("xlb lab up:\n%s", out.String())
	if cfg == "" {
		t.Fatalf("lab up printed no run line")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x, err := runLabXLB(ctx, prefix+"xlb", filepath.Dir(cfg), cfg, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatalf("the printed run line: %v", err)
	}
	outSt, errOut, err := runXLB(t, "status", "--json", "-c", cfg)
	if err != nil {
		t.Fatalf("status of the lab's xlb: %v %s", err, errOut)
	}
	var st control.Status
	if err := json.Unmarshal([]byte(outSt), &st); err != nil || len(st.Rules) != 4 {
		t.Errorf("the lab's xlb serves %d rules (%v), want 4", len(st.Rules), err)
	}
	if err := x.Stop(); err != nil {
		t.Error(err)
	}
	up.Process.Signal(syscall.SIGINT)
	if err := up.Wait(); err != nil {
		t.Errorf("lab up after Ctrl-C: %v", err)
	}
	if left := lab.Namespaces(prefix); len(left) != 0 {
		t.Errorf("lab up left %v", left)
	}
}

// TestLabDownCLI: `xlb lab down` removes the lab's own namespaces, lists
// them, and leaves a namespace that merely starts with the prefix (issue
// 12 item 4).
func TestLabDownCLI(t *testing.T) {
	testutil.RequireRoot(t)
	prefix := testutil.Unique("ldc") + "-"
	for _, s := range []string{"client", "be3", "mine"} {
		ns, err := netns.New(prefix + s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if netns.Exists(ns.Name) {
				ns.Delete()
			}
		})
	}
	out, errOut, err := runXLB(t, "lab", "down", "--prefix", prefix)
	if err != nil {
		t.Fatalf("lab down: %v %s", err, errOut)
	}
	for _, want := range []string{"removed namespace " + prefix + "client\n", "removed namespace " + prefix + "be3\n", "removed 2 namespace(s) of lab"} {
		if !strings.Contains(out, want) {
			t.Errorf("lab down printed %q, lacking %q", out, want)
		}
	}
	if !netns.Exists(prefix + "mine") {
		t.Errorf("lab down removed %smine, which no lab creates", prefix)
	}
	if netns.Exists(prefix+"client") || netns.Exists(prefix+"be3") {
		t.Errorf("lab down left the lab's namespaces")
	}
}

// TestSecondDaemon: a second xlb on the same interface stops at once,
// naming the first one's pid, and the first keeps serving; a daemon that
// cannot bind its control socket stops before it attaches anything (issue
// 12 item 14).
func TestSecondDaemon(t *testing.T) {
	testutil.RequireRoot(t)
	l, rules, dir, sock, _ := webLab(t, lab.Options{Backends: 2, ClientAddrs: 50})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, d := range []string{t.TempDir(), dir} { // another configuration, then the same one
		_, err := startLabXLB(ctx, l, d, rules, func(s string) { t.Log(s) })
		if err == nil || !strings.Contains(err.Error(), "eth0 already has an XDP program (another xlb? pid ") {
			t.Errorf("second daemon (%s): %v; want it refused, naming the first", d, err)
		}
	}
	if res := drive(t, l, 100, 4); !res.OK() {
		t.Errorf("the first daemon after the second's attempts: %d errors (%v)", res.Errors, res.FirstError)
	}
	if st := statusJSON(t, sock); len(st.Rules) != 1 {
		t.Errorf("the first daemon's control socket after the second's attempts: %+v", st)
	}

	// A control socket another process serves: xlb run stops before it
	// attaches its program.
	ns := testutil.NewNetNS(t, "cs")
	err := ns.Do(func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "plain0"}, PeerName: "plain1"}); err != nil {
			return err
		}
		l, err := netlink.LinkByName("plain0")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatal(err)
	}
	pdir := t.TempDir()
	cfg := plainVethConfig(t, pdir, `"all"`)
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- control.Serve(sctx, filepath.Join(pdir, "xlb.sock"), control.NewHandler(newFakeDaemon()))
	}()
	defer func() { stop(); <-served }()
	testutil.WaitFor(t, 5*time.Second, "the other socket", func() (bool, string) {
		c, err := net.Dial("unix", filepath.Join(pdir, "xlb.sock"))
		if err == nil {
			c.Close()
		}
		return err == nil, fmt.Sprint(err)
	})
	_, err = runLabXLB(ctx, ns.Name, pdir, cfg, func(s string) { t.Log(s) })
	if want := fmt.Sprintf("another process (pid %d) is serving it", os.Getpid()); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("xlb run with a served control socket: %v; want %q", err, want)
	}
	ns.Do(func() error {
		if l, err := netlink.LinkByName("plain0"); err == nil && l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached {
			t.Errorf("the refused daemon left an XDP program on plain0")
		}
		return nil
	})
}

// scrapeAt fetches /metrics at addr inside the appliance's namespace.
func scrapeAt(l *lab.Lab, addr string) (string, error) { return scrapePath(l, addr, "/metrics") }

// scrapePath is scrapeAt of another path (a query).
func scrapePath(l *lab.Lab, addr, path string) (string, error) {
	var body string
	err := l.XLB.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET %s HTTP/1.0\r\n\r\n", path)
		b, err := io.ReadAll(c)
		body = string(b)
		return err
	})
	return body, err
}

// TestReloadKeys: a reload applies metrics_listen (the endpoint moves) and
// control_socket_group live, and refuses a key only a start applies,
// naming it, with exit 1 from xlb reload and the running configuration
// unchanged (it once accepted and ignored them;
// docs/design.md#validation-and-reload).
func TestReloadKeys(t *testing.T) {
	testutil.RequireRoot(t)
	l, _, dir, sock, _ := webLab(t, lab.Options{Backends: 2, ClientAddrs: 20})
	if _, err := scrapeAt(l, "127.0.0.1:9641"); err != nil {
		t.Fatalf("metrics before the move: %v", err)
	}
	main := filepath.Join(dir, "xlb.toml")
	orig, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(from, to string) {
		t.Helper()
		text := strings.Replace(string(orig), from, to, 1)
		if text == string(orig) {
			t.Fatalf("%q not in xlb.toml", from)
		}
		os.WriteFile(main, []byte(text), 0o644)
	}
	edit(`metrics_listen = "127.0.0.1:9641"`, "metrics_listen = \"127.0.0.1:9642\"\ncontrol_socket_group = \"64998\"")
	if out, errOut, err := xlbCtl(t, sock, 1, "reload"); err != nil {
		t.Fatalf("reload moving the metrics: %v %s %s", err, out, errOut)
	}
	if body, err := scrapeAt(l, "127.0.0.1:9642"); err != nil || !strings.Contains(body, "xlb_info") {
		t.Errorf("metrics at the new address: %v", err)
	}
	if _, err := scrapeAt(l, "127.0.0.1:9641"); err == nil {
		t.Errorf("metrics still served at the old address")
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o660 || fi.Sys().(*syscall.Stat_t).Gid != 64998 {
		t.Errorf("control socket after control_socket_group = 64998: %v %v", fi.Mode(), err)
	}
	orig, _ = os.ReadFile(main)

	edit("max_entries = 262144", "max_entries = 131072")
	_, errOut, err := xlbCtl(t, sock, 1, "reload")
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error()+errOut, "conntrack.max_entries cannot change while running") {
		t.Errorf("reload changing max_entries: %v %s; want it refused, naming the key", err, errOut)
	}
	if body, err := scrapeAt(l, "127.0.0.1:9642"); err != nil || !strings.Contains(body, `xlb_config_reloads_total{result="rejected"} 1`) {
		t.Errorf("after the refused reload: %v", err)
	}
}

// TestReloadGuardRails: a reload that leaves a rule with drained backends
// only, or no rule at all, is refused without --force; every warning
// validate gives is printed by xlb reload
// (docs/design.md#validation-and-reload).
func TestReloadGuardRails(t *testing.T) {
	testutil.RequireRoot(t)
	l, rules, dir, sock, _ := webLab(t, lab.Options{Backends: 2, ClientAddrs: 20})
	v4, _ := l.BackendAddrs(false)
	drainVia(t, sock, "web4", v4[0])
	// The rule keeps only the drained backend, and a UDP rule that is not
	// fragment-safe comes along (a warning).
	rules[0].Backends = []int{0}
	udp := lab.Rule{Name: "dns", VIP: l.Opts.VIP4, Protocol: "UDP", Ports: `["53"]`, Encap: "IPIP", Health: healthNone}
	if _, err := l.WriteConfig(dir, append(rules, udp)); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := xlbCtl(t, sock, 1, "reload")
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "reload refused: rule web4 would keep only drained backends") || !strings.Contains(errOut, "warning: rules.d/dns.toml:") {
		t.Errorf("reload leaving only drained backends: %v, stderr %q; want it refused, with the warnings", err, errOut)
	}
	if st := statusJSON(t, sock); len(st.Rules) != 1 || len(st.Rules[0].Backends) != 2 {
		t.Errorf("after the refused reload: %d rules; want the running one with 2 backends", len(st.Rules))
	}
	out, errOut, err := xlbCtl(t, sock, 1, "reload", "--force")
	if err != nil || !strings.Contains(out, "reloaded") || !strings.Contains(errOut, "warning: rules.d/dns.toml:") {
		t.Errorf("reload --force: %v %s %s", err, out, errOut)
	}
	// No rules at all.
	for _, f := range []string{"web4.toml", "dns.toml"} {
		os.Remove(filepath.Join(dir, "rules.d", f))
	}
	if _, _, err := xlbCtl(t, sock, 1, "reload"); err == nil || !strings.Contains(err.Error(), "the new configuration has no rules: all 2 rule(s) and their VIPs would stop") {
		t.Errorf("reload to no rules: %v; want it refused", err)
	}
	if st := statusJSON(t, sock); len(st.Rules) != 2 {
		t.Errorf("after the refused reload: %d rules, want 2", len(st.Rules))
	}
}

// TestReloadRevivedOverride: a drain kept in the state file while its
// backend was out of the configuration is announced by the reload that
// brings the backend back (docs/design.md#the-state-overlay).
func TestReloadRevivedOverride(t *testing.T) {
	testutil.RequireRoot(t)
	l, rules, dir, sock, _ := webLab(t, lab.Options{Backends: 2, ClientAddrs: 20})
	v4, _ := l.BackendAddrs(false)
	drainVia(t, sock, "web4", v4[1])
	rules[0].Backends = []int{0}
	l.WriteConfig(dir, rules)
	if _, errOut, err := xlbCtl(t, sock, 1, "reload"); err != nil || strings.Contains(errOut, "applies again") {
		t.Fatalf("reload without be1: %v %s", err, errOut)
	}
	rules[0].Backends = nil
	l.WriteConfig(dir, rules)
	_, errOut, err := xlbCtl(t, sock, 1, "reload")
	want := "warning: rule web4 backend " + v4[1].String() + " is back in the configuration and its CLI override applies again: drained since "
	if err != nil || !strings.Contains(errOut, want) {
		t.Errorf("reload bringing be1 back: %v, stderr %q; want %q", err, errOut, want)
	}
	if b := backendOf(statusJSON(t, sock), "web4", v4[1].String()); b.Admin != "DRAINED" || b.AdminSource != "cli" {
		t.Errorf("be1 after it came back: %s (%s), want DRAINED (cli)", b.Admin, b.AdminSource)
	}
}

// TestWeightStates: a WEIGHTED_MAGLEV rule says in the table why a
// backend gets no share (MISSING_WEIGHT: no weight header), and a plain
// MAGLEV rule reports no weight state at all (docs/design.md#weights).
func TestWeightStates(t *testing.T) {
	testutil.RequireRoot(t)
	l := labWith(t, lab.Options{Backends: 2, ClientAddrs: 20})
	rules := l.DefaultRules("IPIP")[:2] // web4, web6
	rules[0].Extra = "locality_lb_policy = \"WEIGHTED_MAGLEV\"\n"
	l.Backends[1].SetWeight(2) // be0 sends no weight header
	_, sock := startOps(t, l, t.TempDir(), rules)
	v4, _ := l.BackendAddrs(false)
	testutil.WaitFor(t, 20*time.Second, "be1 weighted in", func() (bool, string) {
		b := backendOf(statusJSON(t, sock), "web4", v4[1].String())
		return b.WeightState == "OK" && b.Share > 0.99, fmt.Sprintf("%+v", b)
	})
	st := statusJSON(t, sock)
	if b := backendOf(st, "web4", v4[0].String()); b.WeightState != "MISSING_WEIGHT" || b.WeightEffective != 0 {
		t.Errorf("be0 of the weighted rule: state %q, weight %d; want MISSING_WEIGHT, 0", b.WeightState, b.WeightEffective)
	}
	for _, r := range st.Rules {
		if r.Name != "web6" {
			continue
		}
		for _, b := range r.Backends {
			if b.WeightState != "" {
				t.Errorf("plain MAGLEV rule web6 reports weight state %q for %s", b.WeightState, b.Address)
			}
		}
	}
	out, _, _ := xlbCtl(t, sock, 1, "status")
	if !strings.Contains(out, "0 (MISSING_WEIGHT)") {
		t.Errorf("status does not say why be0 has no share:\n%s", out)
	}
	// The metrics alike: weights of the weighted rule only.
	body := scrape(t, l)
	weighted := 0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "xlb_backend_weight{") {
			continue
		}
		if strings.Contains(line, `rule="web6"`) {
			t.Errorf("a weight state for the plain MAGLEV rule: %s", line)
		}
		if strings.Contains(line, `rule="web4"`) {
			weighted++
		}
	}
	if weighted != 2 || !strings.Contains(body, `weight_state="MISSING_WEIGHT"`) {
		t.Errorf("%d weight samples of web4 (want 2, be0 MISSING_WEIGHT)", weighted)
	}
}

// TestInterfaceGone: a daemon whose interface is deleted stops with exit
// status 1 and says why, instead of serving nothing unnoticed (a lab's
// teardown left successors of xlb restart running after their namespace
// was gone).
func TestInterfaceGone(t *testing.T) {
	ns := plainVeth(t)
	x, err := plainXLB(t, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Stop() })
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName("plain0")
		if err != nil {
			return err
		}
		return netlink.LinkDel(l)
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-x.exited:
		x.exited <- err
		if exitCode(err) != 1 || !strings.Contains(x.log.String(), "interface plain0 (index ") || !strings.Contains(x.log.String(), ") no longer exists") {
			t.Errorf("exit %v (status %d), want 1 naming the interface:\n%s", err, exitCode(err), x.log)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("xlb still runs 20 s after its interface was deleted:\n%s", x.log)
	}
}

// childOf returns the pid of a child of process pid, or 0. It reads the
// children of pid's threads (a few files), not the whole of /proc, so a
// test can poll it every millisecond.
func childOf(pid int) int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			if child, err := strconv.Atoi(fs[0]); err == nil {
				return child
			}
		}
	}
	return 0
}

// TestRestartCarriesLatestVerdicts: the running daemon serves on while
// its successor prepares, and the verdict its checker reaches meanwhile
// is the successor's at the cut-over. The successor is stopped early
// (before or while it prepares) and be1 starts failing, so only the
// running daemon's checker sees it: that daemon must answer status with
// be1 UNHEALTHY, refuse a backend change, defer a SIGHUP to the
// successor, and the successor must say be1 UNHEALTHY since a time
// before it was let go on (through the state document, or the verdicts
// carried with the cut-over when the offer came first). Before, the
// running daemon's control goroutine waited for the successor: status
// hung, and the verdict stayed parked.
func TestRestartCarriesLatestVerdicts(t *testing.T) {
	testutil.RequireRoot(t)
	l := labWith(t, lab.Options{Backends: 2})
	rules := l.DefaultRules("IPIP")[:1]
	rules[0].Health = fmt.Sprintf("type = \"HTTP\"\nport = %d\nrequest_path = \"/healthz\"\ninterval = \"1s\"\ntimeout = \"1s\"\nhealthy_threshold = 1\nunhealthy_threshold = 1\n", l.Opts.HealthPort)
	x, sock := startOps(t, l, t.TempDir(), rules)
	v4, _ := l.BackendAddrs(false)
	be1 := v4[1].String()
	testutil.WaitFor(t, 10*time.Second, "be1 HEALTHY", func() (bool, string) {
		b := backendOf(statusJSON(t, sock), "web4", be1)
		return b.Health == "HEALTHY", b.Health
	})

	type restarted struct {
		res *control.RestartResult
		err error
	}
	done := make(chan restarted, 1)
	go func() {
		res, err := restartXLB(t, x, "restart")
		done <- restarted{res, err}
	}()
	succ := stopSuccessor(t, x)
	select {
	case r := <-done:
		syscall.Kill(succ, syscall.SIGCONT)
		t.Fatalf("the restart ended before its successor could be stopped: %+v, %v", r.res, r.err)
	default:
	}
	// be1 fails from now on. The running daemon's checker probes it (the
	// stopped successor cannot): when the health endpoint has seen a third
	// request since, the second, answered 503, has been recorded (a
	// target's probes run one after the other).
	seen := l.Backends[1].Stats().HealthRequests
	l.Backends[1].SetHealthy(false)
	testutil.WaitFor(t, 20*time.Second, "three probes of be1 by the running daemon", func() (bool, string) {
		n := l.Backends[1].Stats().HealthRequests - seen
		return n >= 3, fmt.Sprint(n)
	})
	// The running daemon serves on while its successor prepares: it
	// answers, applies be1's verdict, refuses a change the successor's
	// state document would not have, and passes a SIGHUP on.
	cl := control.NewClient(sock)
	defer cl.Close()
	testutil.WaitFor(t, 10*time.Second, "be1 UNHEALTHY in the running daemon", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		st, err := cl.Status(ctx, control.StatusQuery{Rule: "web4"})
		if err != nil {
			return false, err.Error()
		}
		b := backendOf(*st, "web4", be1)
		if !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, "a restart is under way") }) {
			return false, fmt.Sprintf("%s, no restart in the warnings %q", b.Health, st.Warnings)
		}
		return b.Health == "UNHEALTHY", b.Health
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := cl.ChangeBackend(ctx, control.BackendChange{Action: control.ActionDrain, Rule: "web4", Backend: v4[0].String()})
	cancel()
	if err == nil || !strings.Contains(err.Error(), "a restart is under way") {
		t.Errorf("backend drain during the restart: %v, want refused: a restart is under way", err)
	}
	if err := x.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the SIGHUP deferred", func() (bool, string) {
		return strings.Contains(x.log.String(), "reload deferred: a restart is under way"), ""
	})
	resumed := time.Now()
	if err := syscall.Kill(succ, syscall.SIGCONT); err != nil {
		t.Fatalf("resume the successor: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("xlb restart: %v", r.err)
	}
	if r.res.PID != succ {
		t.Fatalf("the restart handed over to pid %d, not to the stopped %d", r.res.PID, succ)
	}
	// The control socket is the successor's once the restart returned (a
	// request racing the cut-over may meet the predecessor's closing
	// server: asked again).
	var b control.Backend
	testutil.WaitFor(t, 10*time.Second, "the successor's status", func() (bool, string) {
		out, errOut, err := xlbCtl(t, sock, 1, "status", "--json")
		if err != nil {
			return false, err.Error() + errOut
		}
		var st control.Status
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return false, err.Error()
		}
		b = backendOf(st, "web4", be1)
		return true, ""
	})
	if b.Health != "UNHEALTHY" || b.HealthSince == nil || !b.HealthSince.Before(resumed) {
		t.Errorf("be1 in the successor: %s since %v; want UNHEALTHY since before the successor resumed (%v)", b.Health, b.HealthSince, resumed)
	}
	testutil.WaitFor(t, 10*time.Second, "the successor's reload for the SIGHUP", func() (bool, string) {
		return strings.Contains(x.log.String(), "reloading, as SIGHUP asked the previous daemon"), ""
	})
	stopDaemon(t, l, x)
}

// stopSuccessor stops (SIGSTOP) the successor of the restart x was just
// asked for, as early as it can, and returns its pid; a cleanup lets it
// go on, so a test that fails early leaves no stopped process. It needs
// tens of milliseconds to start before it can even say hello. Only a
// process running the restart's `run -c <config>` with the hand-over's
// descriptor in its environment is the successor (a pid that is gone
// when it is signalled is looked for again).
func stopSuccessor(t *testing.T, x *labXLB) int {
	t.Helper()
	succ := 0
	for end := time.Now().Add(10 * time.Second); succ == 0 && time.Now().Before(end); time.Sleep(time.Millisecond) {
		pid := childOf(x.cmd.Process.Pid)
		if pid == 0 {
			continue
		}
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); !strings.Contains(string(b), x.config) {
			continue
		}
		// Forked but not yet executed, the child still has this
		// daemon's command line: stopped there, it would hold the
		// daemon's exec (os/exec waits for it) instead of the successor.
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); !strings.Contains(string(b), handover.EnvFD+"=") {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err == nil {
			succ = pid
		} else if err != syscall.ESRCH {
			t.Fatalf("stop the successor %d: %v", pid, err)
		}
	}
	if succ == 0 {
		t.Fatal("no successor process to stop within 10 s of xlb restart")
	}
	t.Cleanup(func() { syscall.Kill(succ, syscall.SIGCONT) })
	return succ
}

// TestStopAbandonsRestart: `xlb stop` while a successor prepares kills
// the successor, answers the restart that it was abandoned, and stops
// the daemon as ever (the program detached).
func TestStopAbandonsRestart(t *testing.T) {
	testutil.RequireRoot(t)
	l := labWith(t, lab.Options{Backends: 1})
	x, _ := startOps(t, l, t.TempDir(), l.DefaultRules("IPIP")[:1])
	done := make(chan error, 1)
	go func() {
		_, err := restartXLB(t, x, "restart")
		done <- err
	}()
	succ := stopSuccessor(t, x)
	stopDaemon(t, l, x)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "restart abandoned: the daemon stops") {
			t.Errorf("xlb restart: %v, want abandoned", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("xlb restart did not answer within 20 s of xlb stop")
	}
	waitExited(t, succ, 10*time.Second, "the successor killed") // the stopped daemon's child: a zombie then
	if xdpAttached(t, l) {
		t.Errorf("the program is still attached after xlb stop during a restart")
	}
}
