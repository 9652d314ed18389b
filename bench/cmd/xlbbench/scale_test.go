package main

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/config"
)

// TestScaleConfig: the written configuration loads with the real loader:
// N rules with M backends each, no two rules with the same set, every
// address of the pool used, and a health check as asked.
func TestScaleConfig(t *testing.T) {
	for _, tc := range []struct {
		rules, backends, pool int
		health                string
	}{{30, 10, 100, "NONE"}, {7, 5, 13, "TCP"}, {12, 4, 48, "NONE"}, {100, 10, 1000, "NONE"}} {
		o := scaleOptions{rules: tc.rules, backends: tc.backends, pool: tc.pool, health: tc.health, interval: 5e9}
		cfgPath, err := writeScaleConfig(o, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := config.Load(cfgPath)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if len(cfg.Rules) != tc.rules {
			t.Fatalf("%+v: %d rules", tc, len(cfg.Rules))
		}
		sets := map[string]bool{}
		used := map[netip.Addr]bool{}
		vips := map[string]bool{}
		for _, r := range cfg.Rules {
			var addrs []string
			for _, b := range r.Backends() {
				addrs = append(addrs, b.Addr.String())
				used[b.Addr] = true
				if !netip.MustParsePrefix(scaleBackends).Contains(b.Addr) {
					t.Fatalf("backend %s outside %s", b.Addr, scaleBackends)
				}
			}
			if len(addrs) != tc.backends {
				t.Fatalf("rule %s: %d backends", r.Name, len(addrs))
			}
			slices.Sort(addrs)
			key := strings.Join(addrs, ",")
			if sets[key] {
				t.Fatalf("%+v: rule %s repeats another rule's backend set", tc, r.Name)
			}
			sets[key] = true
			vk := r.VIP.String() + "/" + r.Ports.Ranges[0].String()
			if vips[vk] {
				t.Fatalf("rule %s: VIP and port %s used twice", r.Name, vk)
			}
			vips[vk] = true
			if got := r.HealthCheck.Type.String(); got != tc.health {
				t.Fatalf("rule %s: health %s, want %s", r.Name, got, tc.health)
			}
		}
		if n := distinctBackends(o); len(used) != n {
			t.Errorf("%+v: %d distinct backends, distinctBackends says %d", tc, len(used), n)
		}
	}
	// The default size uses the whole pool (without loading 1000 files).
	if n := distinctBackends(scaleOptions{rules: 1000, backends: 100, pool: 10000}); n != 10000 {
		t.Errorf("1000 × 100 from 10000: %d distinct backends", n)
	}
}

// TestScaleVIPs: 4095 VIPs per port, all in the benchmark range.
func TestScaleVIPs(t *testing.T) {
	seen := map[netip.AddrPort]bool{}
	for i := range 9000 {
		a, p := scaleVIP(i)
		ap := netip.AddrPortFrom(a, uint16(p))
		if seen[ap] || !netip.MustParsePrefix("198.18.16.0/20").Contains(a) {
			t.Fatalf("rule %d: %s repeated or outside 198.18.16.0/20", i, ap)
		}
		seen[ap] = true
	}
}

func TestParseRSS(t *testing.T) {
	rss, hwm, err := parseRSS("Name:\txlb\nVmHWM:\t  2097152 kB\nVmRSS:\t  1048576 kB\nThreads: 9\n")
	if err != nil || rss != 1024 || hwm != 2048 {
		t.Errorf("parseRSS = %v, %v, %v; want 1024, 2048", rss, hwm, err)
	}
	if _, _, err := parseRSS("VmRSS: 12 MB\n"); err == nil {
		t.Error("no error for a unit other than kB")
	}
	if _, _, err := parseRSS("Name: x\n"); err == nil {
		t.Error("no error without the fields")
	}
}

// TestParseMemStats: the MemStats lines of a debug=1 heap profile, in
// MiB; a profile without them is an error.
func TestParseMemStats(t *testing.T) {
	text := "heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 1\n# Sys = 314572800\n# HeapIdle = 104857600\n# HeapInuse = 209715200\n# HeapReleased = 52428800\n"
	got, err := parseMemStats(text)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"HeapInuse": 200, "HeapFree": 50, "Sys": 300}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v MiB, want %v", k, got[k], v)
		}
	}
	if _, err := parseMemStats("heap profile: 1: 2\n# Alloc = 1\n"); err == nil {
		t.Error("a profile without HeapInuse: no error")
	}
}

// TestLogFields: the start's phases from the daemon's "serving" line.
func TestLogFields(t *testing.T) {
	line := `time=2026-12-02T02:00:00Z level=INFO msg=serving rules=1000 queues="[0 1]" config=310ms engine=52ms nexthops=1.2s publish=4.1s`
	got := logFields(line, "config", "engine", "health", "nexthops", "publish")
	want := map[string]string{"config": "310ms", "engine": "52ms", "nexthops": "1.2s", "publish": "4.1s"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// TestMain lets the test binary be the `xlbbench rusage` launcher that
// timedRSS starts (it runs os.Executable).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "rusage" {
		os.Exit(rusageMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// TestTimedRSS: a command's peak RSS is its own, not the harness's: a
// shell that touches 64 MiB reports more than 64, one that does nothing
// far less, though the harness holds 128 MiB when it starts them; the
// output and the exit status come through.
func TestTimedRSS(t *testing.T) {
	ballast := make([]byte, 128<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	_, out, n, small, err := timedRSS("/bin/sh", "-c", "echo hello")
	if err != nil || string(out) != "hello\n" || n != 6 {
		t.Fatalf("echo: %q (%d bytes), %v", out, n, err)
	}
	_, out, _, big, err := timedRSS("/bin/sh", "-c", `x=$(head -c 16777216 /dev/zero | tr '\0' a); echo ${#x}`)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "16777216\n" || small > 32 || big < 16 {
		t.Errorf("peak RSS: %.1f MiB for echo, %.1f MiB for a shell that holds 16 MiB (the harness holds 128)", small, big)
	}
	if _, _, _, _, err := timedRSS("/bin/sh", "-c", "exit 3"); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("exit 3: %v", err)
	}
	runtime.KeepAlive(ballast)
}

// TestTCPOpens: the probes answered are read from the Tcp lines of
// /proc/net/snmp by name, wherever the columns are.
func TestTCPOpens(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "snmp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("Ip: Forwarding DefaultTTL\nIp: 1 64\n" +
		"Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets\n" +
		"Tcp: 1 200 120000 -1 11 7 4012 11\nUdp: InDatagrams\nUdp: 5\n")
	passive, failed, err := tcpOpens(f)
	if err != nil || passive != 7 || failed != 4012 {
		t.Errorf("PassiveOpens %d, AttemptFails %d (%v), want 7 and 4012", passive, failed, err)
	}
	// The live file of this namespace parses too.
	live, err := os.Open("/proc/thread-self/net/snmp")
	if err != nil {
		t.Skipf("skipped: no /proc/thread-self/net/snmp: %v", err)
	}
	defer live.Close()
	if _, _, err := tcpOpens(live); err != nil {
		t.Error(err)
	}
}

// TestWatchFDs: the descriptor watch sees descriptors opened while it
// runs, and fdLimit reads the process's soft open-file limit.
func TestWatchFDs(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if got := fdLimit(os.Getpid()); uint64(got) != lim.Cur {
		t.Errorf("fdLimit %d, want the soft limit %d", got, lim.Cur)
	}
	before := watchFDs(context.Background(), os.Getpid())
	base := before()
	counts := make(chan int, 16)
	fdCounted = func(n int) {
		select {
		case counts <- n:
		default:
		}
	}
	defer func() { fdCounted = nil }()
	peak := watchFDs(context.Background(), os.Getpid())
	var files []*os.File
	for range 50 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// The files stay open until the watch counted them: a busy machine
	// may not run its goroutine for longer than a few samples.
	deadline := time.After(30 * time.Second)
	for counted := false; !counted; {
		select {
		case n := <-counts:
			counted = n >= base+50
		case <-deadline:
			t.Fatalf("the watch did not count the 50 opened descriptors (over %d) within 30 s", base)
		}
	}
	for _, f := range files {
		f.Close()
	}
	if got := peak(); got < base+50 {
		t.Errorf("peak %d descriptors, want at least %d + the 50 opened", got, base)
	}
}

// TestCountSeries: the scrape's sample lines are those that are neither
// comments nor empty, and the bytes are the text's.
func TestCountSeries(t *testing.T) {
	text := "# HELP a_total A.\n# TYPE a_total counter\na_total{q=\"0\"} 1\na_total{q=\"1\"} 2\n\nb 3\n" + strings.Repeat("#", 100000) + "\n"
	n, series, err := countSeries(strings.NewReader(text))
	if err != nil || n != len(text) || series != 3 {
		t.Errorf("countSeries: %d bytes, %d series, %v; want %d bytes, 3 series", n, series, err, len(text))
	}
}

// TestSleepCtx: a long wait of the harness ends when its context does.
func TestSleepCtx(t *testing.T) {
	if err := sleepCtx(context.Background(), time.Millisecond); err != nil {
		t.Errorf("a short sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	start := time.Now()
	if err := sleepCtx(ctx, time.Minute); err == nil {
		t.Error("a cancelled sleep returned no error")
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("a cancelled sleep took %v", d)
	}
}

// TestStatusMeanwhile: the watch of a restart counts answers and failed
// requests and reports the longest wait, a request still waiting when
// it stops included. The daemon here answers the first summary at once,
// fails the second after 200 ms, and holds every later one.
func TestStatusMeanwhile(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "xlb.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var n atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			w.Write([]byte(`{"summary":{}}`))
		case 2:
			time.Sleep(200 * time.Millisecond)
			http.Error(w, `{"error":"closing"}`, http.StatusServiceUnavailable)
		default:
			<-release
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	defer close(release)
	stop := make(chan struct{})
	time.AfterFunc(3*time.Second, func() { close(stop) })
	answers, failed, slowest := statusMeanwhile(context.Background(), sock, stop)
	if answers != 1 || failed != 1 {
		t.Errorf("%d answered, %d failed; want 1 and 1", answers, failed)
	}
	// The third request waits from about 0.45 s (two 250 ms pauses and
	// the failed one's 200 ms) until the stop at 3 s: over 1 s even when
	// a loaded machine delays its start by a second and a half.
	if slowest < 1000 || slowest > 4000 {
		t.Errorf("the longest wait %.0f ms, want the held request's (about 2500 ms)", slowest)
	}
}
