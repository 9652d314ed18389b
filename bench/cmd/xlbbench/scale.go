package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/netns"
)

// `xlbbench scale` measures the control plane at the size of a real
// deployment: N rules × M backends (health NONE or TCP, IPIP) in a lab
// namespace, a real `xlb run`, and what an operator sees: start → serving,
// RSS, one-change reload, the read commands, and the health checks' CPU.
//
//	ns <prefix>app: eth0 198.18.0.2 (Q queues) ── ns <prefix>gw: eth0 198.18.0.1
//	  default via 198.18.0.1                          local 198.19.0.0/16 dev lo (AnyIP)
//	  xlb run                                         TCP listener :8080 (health probes)
//
// The backends are addresses of 198.19.0.0/16 that the gateway owns as a
// local route, so a TCP health probe to any of them is answered by one
// listener and no backend namespace is needed; no data traffic is sent.

const (
	scaleGW       = "198.18.0.1"
	scaleApp      = "198.18.0.2"
	scaleHealth   = 8080
	scalePprof    = "127.0.0.1:6060"
	scaleVIPFirst = "198.18.16.1"        // VIPs: 198.18.16.1 … (4095 per port)
	scaleBackends = "198.19.0.0/16"      // backend pool: 198.19.0.1 …
	scaleClient   = "198.51.100.7:40000" // the flow `xlb lookup` asks about
)

type scaleOptions struct {
	xlb, xlbctl, out string
	rules, backends  int
	pool             int
	queues           int
	health           string
	interval         time.Duration
	repeat           int
	heap             bool
	probeWindow      time.Duration
	daemonLog        string // --daemon-log
	restart          bool   // --restart
	servingTimeout   time.Duration
	startCPU         time.Duration
	jsonReads        bool
	scrapes          []string      // metrics queries to scrape ("": the whole endpoint)
	scrapeCPU        time.Duration // profile the daemon over this long of full scrapes
	scrapeSave       string        // a directory for each query's first scrape
	systemd          bool          // --systemd: a stand-in for systemd's fd store (scale_systemd.go)
}

// ScaleResults is the JSON file of one scale run (bench/results/<date>-scale.json).
type ScaleResults struct {
	Date         string `json:"date"`
	Kernel       string `json:"kernel"`
	LoadAvg      string `json:"loadavg_before"`
	LoadAvgAfter string `json:"loadavg_after"`
	Revision     string `json:"xlb_version"`
	// Systemd says what the stand-in for systemd's fd store held at the
	// end (--systemd; empty without).
	Systemd          string  `json:"systemd,omitempty"`
	Rules            int     `json:"rules"`
	Backends         int     `json:"backends_per_rule"`
	DistinctBackends int     `json:"distinct_backends"`
	Queues           int     `json:"queues"`
	Health           string  `json:"health"`
	ValidateSec      float64 `json:"validate_sec"`
	StartSec         float64 `json:"start_to_serving_sec"`
	// StartCPUSec is the daemon's CPU time (all threads) when it said it
	// serves: what the start costs whatever the machine's load.
	StartCPUSec float64 `json:"start_cpu_sec"`
	// StartPhases are the phases of the start as the daemon logs them
	// with "serving" (config, engine, health, nexthops, publish).
	StartPhases map[string]string `json:"start_phases,omitempty"`
	RSSStartMiB float64           `json:"rss_after_start_mib"`
	// Where the RSS after start is: the kernel's split (anonymous,
	// shared memory: the memfd arenas and UMEM, files) and the Go
	// runtime's (heap in use, heap held but free, released), in MiB.
	MemStart map[string]float64 `json:"memory_after_start_mib,omitempty"`
	// The heap profile taken one second after start, and its top.
	StartHeapProfile string   `json:"start_heap_profile,omitempty"`
	StartHeapTop     []string `json:"start_heap_top,omitempty"`
	// The CPU profile of the start (--start-cpu), and its top.
	StartCPUProfile string   `json:"start_cpu_profile,omitempty"`
	StartCPUTop     []string `json:"start_cpu_top,omitempty"`
	// One backend added to one rule file, then `xlb reload`.
	ReloadSec float64 `json:"reload_one_backend_sec"`
	// ReloadDaemon is the daemon's own time for that reload, from its
	// "reloaded" line (took=…): without the CLI process and its round
	// trip.
	ReloadDaemon      string  `json:"reload_one_backend_daemon,omitempty"`
	ReloadTwiceDaemon string  `json:"reload_back_daemon,omitempty"`
	RSSReloadMiB      float64 `json:"rss_after_reload_mib"`
	ReloadTwiceSec    float64 `json:"reload_back_sec"` // the backend removed again
	RSSReload2MiB     float64 `json:"rss_after_second_reload_mib"`
	// CLI changes of one backend of one rule.
	DrainSec   float64 `json:"backend_drain_sec"`
	UndrainSec float64 `json:"backend_undrain_sec"`
	RSSHWMMiB  float64 `json:"rss_peak_mib"`
	Reads      []Read  `json:"reads"`
	// The daemon's peak RSS (VmHWM) before and after the read commands:
	// what answering them added to its peak.
	ReadsHWMBeforeMiB float64 `json:"reads_rss_peak_before_mib"`
	ReadsHWMAfterMiB  float64 `json:"reads_rss_peak_after_mib"`
	// LookupSocketSec is one lookup asked over the control socket by this
	// harness (no CLI process), the median of 20: the daemon's answer.
	LookupSocketSec float64 `json:"lookup_socket_sec"`
	// With --restart, at the end: `xlb restart` (the command's time and
	// the workers' pause it reports), and the backends in their rules'
	// eligible sets before it and the fewest over restartWatch after it,
	// with the most that had no HEALTHY verdict meanwhile. A successor
	// that loses verdicts shows here.
	RestartSec            float64 `json:"restart_sec,omitempty"`
	RestartPauseMS        float64 `json:"restart_pause_ms,omitempty"`
	RestartEligibleBefore int     `json:"restart_eligible_before,omitempty"`
	RestartEligibleMin    int     `json:"restart_eligible_min,omitempty"`
	RestartNotHealthyMax  int     `json:"restart_not_healthy_max,omitempty"`
	// RestartStatusAnswers, RestartStatusFailed, RestartStatusSlowestMS:
	// the summaries asked while `xlb restart` ran (every 250 ms, each when
	// the one before ended), answered and failed, and the longest wait: a
	// daemon whose control goroutine waits for its successor answers none
	// until the cut-over.
	RestartStatusAnswers   int     `json:"restart_status_answers,omitempty"`
	RestartStatusFailed    int     `json:"restart_status_failed,omitempty"`
	RestartStatusSlowestMS float64 `json:"restart_status_slowest_ms,omitempty"`
	// With health TCP: the daemon's CPU (all threads, of one CPU) over
	// ProbeWindowSec once every backend had its first verdict, and the
	// probes the gateway answered per second meanwhile (probeListener).
	ProbeWindowSec float64 `json:"probe_window_sec,omitempty"`
	DaemonCPU      float64 `json:"daemon_cpu_of_one,omitempty"`
	ProbesPerSec   float64 `json:"probes_per_sec,omitempty"`
	// HealthTargets are the probers the daemon started (its "health
	// checks" line) for HealthRuleBackends checked backends of rules:
	// fewer when rules share a probe (pkg/daemon services.go).
	HealthTargets      int `json:"health_targets,omitempty"`
	HealthRuleBackends int `json:"health_rule_backends,omitempty"`
	// FDsPeak is the most descriptors the daemon held at once (its
	// /proc/PID/fd, counted every fdSample from serving to the end), and
	// FDLimit its RLIMIT_NOFILE soft limit: health probes must leave the
	// control plane room under it.
	FDsPeak int `json:"fds_peak"`
	FDLimit int `json:"fd_limit"`
	// The daemon's log lines saying "too many open files", and its
	// warnings that health probes started late (at most one a minute).
	EMFILELines     int      `json:"emfile_log_lines"`
	LateProbesLines int      `json:"late_probes_log_lines"`
	HeapProfile     string   `json:"heap_profile,omitempty"`
	HeapTop         []string `json:"heap_top,omitempty"`
	// Scrapes of the metrics endpoint after start, before the reads.
	Scrapes []Scrape `json:"scrapes,omitempty"`
	// With --scrape-cpu: the daemon's CPU and allocation profiles over
	// back-to-back full scrapes, and their tops.
	ScrapeProfiles []string `json:"scrape_profiles,omitempty"`
	ScrapeCPUTop   []string `json:"scrape_cpu_top,omitempty"`
	ScrapeAllocTop []string `json:"scrape_alloc_top,omitempty"`
}

// Read is one read command: its median wall time over the repeats and the
// bytes it printed.
type Read struct {
	Command string    `json:"command"`
	Sec     float64   `json:"median_sec"`
	All     []float64 `json:"all_sec"`
	Bytes   int       `json:"bytes"`
	// CLIMaxRSSMiB is the largest resident set of the command's process
	// (getrusage): a streamed answer keeps it flat whatever the bytes.
	CLIMaxRSSMiB float64 `json:"cli_max_rss_mib"`
	// DaemonPeakMiB is the daemon's peak RSS (VmHWM) over this command's
	// runs: the peak is reset before them (/proc/PID/clear_refs 5).
	DaemonPeakMiB float64 `json:"daemon_peak_rss_mib"`
}

func scaleMain(args []string) int {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	var o scaleOptions
	fs.StringVar(&o.xlb, "xlb", "", "the xlb binary (required)")
	fs.StringVar(&o.xlbctl, "xlbctl", "", "an xlbctl binary (go build -tags xlbctl ./cmd/xlb): also run --version, status and lookup with it")
	fs.StringVar(&o.out, "out", "bench/results", "directory for the JSON results and the heap profile")
	fs.IntVar(&o.rules, "rules", 1000, "forwarding rules (one file each)")
	fs.IntVar(&o.backends, "backends", 100, "backends per rule")
	fs.IntVar(&o.pool, "pool", 0, "backend addresses the rules draw from (default: rules × backends, at most 10000); no two rules have the same set")
	fs.IntVar(&o.queues, "queues", 2, "queues of the appliance's veth")
	fs.StringVar(&o.health, "health", "NONE", "health checks: NONE or TCP (to every distinct backend, answered by one listener)")
	fs.DurationVar(&o.interval, "interval", 5*time.Second, "health check interval (TCP)")
	fs.IntVar(&o.repeat, "repeat", 3, "runs of each read command (the median is reported)")
	fs.BoolVar(&o.heap, "heap", true, "take a heap profile of the daemon after the reloads (XLB_PPROF_LISTEN) and print its top")
	fs.StringVar(&o.daemonLog, "daemon-log", "", "write everything xlb run prints (its log) into this file")
	fs.BoolVar(&o.restart, "restart", false, "end with `xlb restart`: its time, the workers' pause and the eligible backends over the 5 s after")
	fs.DurationVar(&o.probeWindow, "probe-window", 20*time.Second, "with TCP health: how long to measure the daemon's CPU once every backend has a verdict")
	fs.BoolVar(&o.jsonReads, "json-reads", true, "run the reads that print every rule (status --json, backend list --json: minutes at 1000 rules on a busy machine)")
	fs.DurationVar(&o.startCPU, "start-cpu", 0, "take a CPU profile of the daemon over this long from its start (needs --heap's profile endpoint; 0: none)")
	fs.Func("scrape", "a query of the metrics endpoint to scrape --repeat times after start, e.g. \"scope=rule\" (repeatable; \"full\": none; \"off\": no scrape; default: full and \"scope=appliance&scope=queue&scope=rule\")", func(v string) error {
		switch v {
		case "full":
			v = ""
		case "off":
			o.scrapes = []string{}
			return nil
		}
		o.scrapes = append(o.scrapes, v)
		return nil
	})
	fs.StringVar(&o.scrapeSave, "scrape-save", "", "write each --scrape query's first scrape (its text) into this directory as scrapeN.txt")
	fs.DurationVar(&o.scrapeCPU, "scrape-cpu", 0, "profile the daemon's CPU and allocations over this long of back-to-back full scrapes (needs --heap's profile endpoint; 0: none)")
	fs.BoolVar(&o.systemd, "systemd", false, "run xlb with NOTIFY_SOCKET set to a stand-in for systemd's notification socket and fd store: every publication stores the state document there, as under deploy/systemd/xlb.service")
	fs.DurationVar(&o.servingTimeout, "serving-timeout", 5*time.Minute, "how long `xlb run` may take to serve")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.health = strings.ToUpper(o.health)
	if o.xlb == "" || fs.NArg() > 0 || o.rules < 1 || o.backends < 1 || (o.health != "NONE" && o.health != "TCP") {
		fmt.Fprintln(os.Stderr, "usage: xlbbench scale --xlb PATH [--rules N] [--backends M] [--pool P] [--queues Q] [--health NONE|TCP] [--interval D] [--repeat R] [--heap=false] [--scrape QUERY|full|off]... [--scrape-cpu D] [--out DIR]")
		return 2
	}
	if o.scrapes == nil {
		o.scrapes = defaultScrapes
	}
	if o.pool == 0 {
		o.pool = max(min(o.rules*o.backends, 10000), o.backends+1, o.rules)
	}
	if o.pool <= o.backends || o.pool > 65534 || o.rules > o.pool {
		fmt.Fprintf(os.Stderr, "xlbbench scale: --pool %d: want more than the backends of one rule (%d), at least the rules (%d), at most 65534\n", o.pool, o.backends, o.rules)
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "xlbbench scale: needs root (network namespaces, XDP, AF_XDP)")
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	if err := scale(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "xlbbench scale:", err)
		return 1
	}
	return 0
}

// scaleBackend is the address of backend j of rule i: a run of the pool
// that starts at i × stride, the stride the smallest number ≥ backends
// that is coprime with the pool, so that no two of the first pool rules
// start alike (the same set would share a table and flatter the figures)
// while every address serves about rules × backends / pool rules.
func scaleBackend(o scaleOptions, i, j int) netip.Addr {
	stride := o.backends
	for gcd(stride, o.pool) != 1 {
		stride++
	}
	return poolAddr((i*stride + j) % o.pool)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// distinctBackends counts the addresses the rules use.
func distinctBackends(o scaleOptions) int {
	seen := map[netip.Addr]bool{}
	for i := range o.rules {
		for j := range o.backends {
			seen[scaleBackend(o, i, j)] = true
		}
	}
	return len(seen)
}

func poolAddr(k int) netip.Addr {
	b := netip.MustParsePrefix(scaleBackends).Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + 1 + uint32(k)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// scaleVIP is rule i's VIP and port: 4095 VIPs per port.
func scaleVIP(i int) (netip.Addr, int) {
	b := netip.MustParseAddr(scaleVIPFirst).As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + uint32(i%4095)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 80 + i/4095
}

func ruleName(i int) string { return fmt.Sprintf("r%05d", i) }

// ruleFile is rule i's TOML with the given backends.
func ruleFile(o scaleOptions, i int, backends []netip.Addr) string {
	vip, port := scaleVIP(i)
	var b strings.Builder
	fmt.Fprintf(&b, "name = %q\nvip = %q\nprotocol = \"TCP\"\nports = [\"%d\"]\n\n[encap]\ntype = \"IPIP\"\n\n", ruleName(i), vip, port)
	if o.health == "TCP" {
		fmt.Fprintf(&b, "[health_check]\ntype = \"TCP\"\nport = %d\ninterval = %q\ntimeout = \"2s\"\n\n", scaleHealth, o.interval)
	} else {
		b.WriteString("[health_check]\ntype = \"NONE\"\n\n")
	}
	b.WriteString("[[group]]\nname = \"g\"\nbackends = [")
	for j, a := range backends {
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(a.String()))
	}
	b.WriteString("]\n")
	return b.String()
}

func ruleBackends(o scaleOptions, i int) []netip.Addr {
	out := make([]netip.Addr, o.backends)
	for j := range out {
		out[j] = scaleBackend(o, i, j)
	}
	return out
}

// writeScaleConfig writes xlb.toml and the rule files into dir.
func writeScaleConfig(o scaleOptions, dir string) (string, error) {
	rules := filepath.Join(dir, "rules.d")
	if err := os.MkdirAll(rules, 0o755); err != nil {
		return "", err
	}
	// maglev_table_size only where the default is too small: the
	// smallest prime ≥ 100 × the backends of a rule (the +1 of the
	// reload), what an operator has to write for this size.
	size := ""
	if n := 100 * (o.backends + 1); n > 65537 {
		for !isPrime(n) {
			n++
		}
		size = fmt.Sprintf("maglev_table_size = %d\n", n)
	}
	main := fmt.Sprintf(`# written by xlbbench scale
interface = "eth0"
queues = "all"
hash_seed = "0x1ab5eed"
%srules_dir = "rules.d"
state_file = %q
control_socket = %q
metrics_listen = %q
[conntrack]
max_entries = 65536
`, size, filepath.Join(dir, "state.toml"), filepath.Join(dir, "xlb.sock"), scaleMetrics)
	cfg := filepath.Join(dir, "xlb.toml")
	if err := os.WriteFile(cfg, []byte(main), 0o644); err != nil {
		return "", err
	}
	for i := range o.rules {
		if err := os.WriteFile(filepath.Join(rules, ruleName(i)+".toml"), []byte(ruleFile(o, i, ruleBackends(o, i))), 0o644); err != nil {
			return "", err
		}
	}
	return cfg, nil
}

func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// scaleTopo builds the two namespaces.
func scaleTopo(prefix string, queues int) (app, gw string, err error) {
	app, gw = prefix+"app", prefix+"gw"
	for _, n := range []string{app, gw} {
		if err := run("ip", "netns", "add", n); err != nil {
			return app, gw, err
		}
	}
	q := strconv.Itoa(queues)
	if err := ipBatch(gw,
		fmt.Sprintf("link add eth0 numtxqueues %s numrxqueues %s type veth peer name eth0 netns %s numtxqueues %s numrxqueues %s", q, q, app, q, q),
		"addr add "+scaleGW+"/24 dev eth0", "link set eth0 up", "link set lo up",
		"route add local "+scaleBackends+" dev lo"); err != nil {
		return app, gw, err
	}
	if err := ipBatch(app, "addr add "+scaleApp+"/24 dev eth0", "link set eth0 up", "link set lo up",
		"route add default via "+scaleGW); err != nil {
		return app, gw, err
	}
	time.Sleep(200 * time.Millisecond)
	return app, gw, run("ip", "netns", "exec", app, "ping", "-c1", "-W2", scaleGW)
}

// probeListener listens for the health probes in the gateway and counts
// them: the handshakes the gateway's kernel answered, from its
// /proc/net/snmp (opened in the namespace, so it keeps reading that
// namespace's counters). A connect-only TCP probe resets the half-open
// connection instead of completing the handshake (pkg/health), which the
// kernel counts in AttemptFails; one that completes it counts in
// PassiveOpens and is accepted and closed here.
func probeListener(gw string) (count func() uint64, closeFn func(), err error) {
	ns, err := netns.Open(gw)
	if err != nil {
		return nil, nil, err
	}
	var ln net.Listener
	var snmp *os.File
	if err := ns.Do(func() error {
		var err error
		if snmp, err = os.Open("/proc/thread-self/net/snmp"); err != nil {
			return err
		}
		ln, err = net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", scaleHealth))
		return err
	}); err != nil {
		if snmp != nil {
			snmp.Close()
		}
		return nil, nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	count = func() uint64 {
		passive, failed, _ := tcpOpens(snmp)
		return passive + failed
	}
	return count, func() { ln.Close(); snmp.Close() }, nil
}

// tcpOpens reads the Tcp PassiveOpens and AttemptFails counters of an
// open /proc/net/snmp.
func tcpOpens(f *os.File) (passive, failed uint64, err error) {
	b := make([]byte, 8192)
	n, err := f.ReadAt(b, 0)
	if n == 0 {
		return 0, 0, err
	}
	var names []string
	for _, line := range strings.Split(string(b[:n]), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i := 1; i < len(f) && i < len(names); i++ {
			v, _ := strconv.ParseUint(f[i], 10, 64)
			switch names[i] {
			case "PassiveOpens":
				passive = v
			case "AttemptFails":
				failed = v
			}
		}
	}
	return passive, failed, nil
}

// timed runs the xlb binary with args and returns its wall time and output.
func timed(xlb string, args ...string) (time.Duration, []byte, error) {
	d, out, _, _, err := timedRSS(xlb, args...)
	return d, out, err
}

// timedRSS is timed with the process's peak resident set in MiB. A
// child's peak RSS from wait4 includes what its parent had resident when
// it started the child (Go starts it with vfork; the kernel keeps the
// larger of the two), so the command runs under `xlbbench rusage`, a
// fresh process of a few MiB that measures its wall time and peak RSS
// for the harness (rusageMain). The harness keeps the first 64 KiB of the
// output and counts the rest.
func timedRSS(xlb string, args ...string) (time.Duration, []byte, int, float64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, nil, 0, 0, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return 0, nil, 0, 0, err
	}
	defer r.Close()
	var errOut bytes.Buffer
	out := &headCounter{max: 64 << 10}
	cmd := exec.Command(self, append([]string{"rusage", xlb}, args...)...)
	cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = out, &errOut, []*os.File{w}
	err = cmd.Run()
	w.Close()
	var ns int64
	var rss float64
	if _, serr := fmt.Fscan(r, &ns, &rss); serr != nil && err == nil {
		err = fmt.Errorf("rusage: %w", serr)
	}
	d := time.Duration(ns)
	if err != nil {
		return d, nil, out.n, rss, fmt.Errorf("xlb %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return d, out.head, out.n, rss, nil
}

// rusageMain runs args (a program and its arguments) with the same
// standard streams and writes its wall time in nanoseconds and peak
// resident set in MiB to file descriptor 3 (timedRSS); the exit status is
// the program's.
func rusageMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: xlbbench rusage PROGRAM [ARG...] (3> result)")
		return 2
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	var rss float64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	fmt.Fprintf(os.NewFile(3, "result"), "%d %f\n", d.Nanoseconds(), rss)
	if err != nil {
		if cmd.ProcessState != nil {
			return cmd.ProcessState.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "xlbbench rusage:", err)
		return 1
	}
	return 0
}

// headCounter keeps the first max bytes written and counts them all.
type headCounter struct {
	head []byte
	n    int
	max  int
}

func (h *headCounter) Write(p []byte) (int, error) {
	h.n += len(p)
	if room := h.max - len(h.head); room > 0 {
		h.head = append(h.head, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// rssMiB returns the process's VmRSS and VmHWM in MiB.
func rssMiB(pid int) (rss, hwm float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseRSS(string(b))
}

func parseRSS(status string) (rss, hwm float64, err error) {
	var found int
	for _, l := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("proc status: %s: %q", k, v)
		}
		kb, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, 0, fmt.Errorf("proc status: %s: %w", k, err)
		}
		if k == "VmRSS" {
			rss = kb / 1024
		} else {
			hwm = kb / 1024
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("proc status: no VmRSS and VmHWM")
	}
	return rss, hwm, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func scale(ctx context.Context, o scaleOptions) (err error) {
	res := ScaleResults{Date: time.Now().UTC().Format("2006-01-02T15:04:05Z"), Rules: o.rules, Backends: o.backends, DistinctBackends: distinctBackends(o), Queues: o.queues, Health: o.health}
	res.Kernel, res.LoadAvg = readTrim("/proc/sys/kernel/osrelease"), readTrim("/proc/loadavg")
	if _, v, err := timed(o.xlb, "--version"); err == nil {
		res.Revision = strings.TrimSpace(string(v))
	}
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "scale: "+format+"\n", a...) }

	dir, err := os.MkdirTemp("", "xlbscale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	progress("writing %d rules × %d backends (%d distinct) into %s", o.rules, o.backends, res.DistinctBackends, dir)
	cfg, err := writeScaleConfig(o, dir)
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("xs%d-", os.Getpid()%10000)
	app, gw, err := scaleTopo(prefix, o.queues)
	defer func() {
		for _, n := range []string{app, gw} {
			exec.Command("ip", "netns", "del", n).Run()
		}
	}()
	if err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	// In the namespace: validate also checks the machine's interface.
	d, _, err := timed("ip", "netns", "exec", app, o.xlb, "validate", "-c", cfg)
	if err != nil {
		return err
	}
	res.ValidateSec = d.Seconds()
	progress("xlb validate: %.2f s", res.ValidateSec)
	var probes func() uint64
	if o.health == "TCP" {
		var closeLn func()
		if probes, closeLn, err = probeListener(gw); err != nil {
			return fmt.Errorf("probe listener: %w", err)
		}
		defer closeLn()
	}

	cmd := exec.Command("ip", "netns", "exec", app, o.xlb, "run", "-c", cfg)
	cmd.Env = os.Environ()
	if o.heap {
		cmd.Env = append(cmd.Env, "XLB_PPROF_LISTEN="+scalePprof)
	}
	var store *fdStore
	if o.systemd {
		if store, err = newFDStore(); err != nil {
			return err
		}
		defer store.close()
		cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+store.Path)
	}
	progress("xlb run (start → serving)")
	t0 := time.Now()
	var startCPU chan error
	if o.heap && o.startCPU > 0 {
		startCPU = make(chan error, 1)
		go func() { startCPU <- startProfile(ctx, app, o, &res) }()
	}
	var logTo io.Writer
	if o.daemonLog != "" {
		f, err := os.Create(o.daemonLog)
		if err != nil {
			return err
		}
		defer f.Close()
		logTo = f
	}
	fw, err := startAndWaitFor(cmd, "msg=serving", nil, o.servingTimeout, logTo)
	if err != nil {
		return err
	}
	defer fw.Stop("xlb")
	if store != nil {
		// Under a service manager SIGTERM stops for a restart, keeping
		// the program attached and pinned: `xlb stop` detaches and unpins
		// (and empties the store) before fw.Stop's SIGTERM.
		defer func() {
			if out, err := exec.Command("ip", "netns", "exec", app, o.xlb, "stop", "-c", cfg).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "xlb stop: %v %s\n", err, out)
			}
		}()
	}
	res.StartSec = time.Since(t0).Seconds()
	fdsPeak := watchFDs(ctx, fw.pid)
	defer func() { _ = fdsPeak() }()
	if cpu, err := procCPU(fw.pid); err == nil {
		res.StartCPUSec = cpu.Seconds()
	}
	res.StartPhases = logFields(fw.ready, "config", "engine", "health", "nexthops", "publish")
	hc := logFields(fw.healthChecks(), "targets", "rule_backends") // logged before serving
	res.HealthTargets, _ = strconv.Atoi(hc["targets"])
	res.HealthRuleBackends, _ = strconv.Atoi(hc["rule_backends"])
	time.Sleep(time.Second)
	if res.RSSStartMiB, _, err = rssMiB(fw.pid); err != nil {
		return err
	}
	progress("serving after %.2f s (%v; %.2f s of CPU), RSS %.0f MiB", res.StartSec, res.StartPhases, res.StartCPUSec, res.RSSStartMiB)
	if o.heap {
		if res.MemStart, err = memorySplit(fw.pid, app); err != nil {
			return err
		}
		if res.StartHeapProfile, res.StartHeapTop, err = heapProfile(app, o.out, res.Date, "start"); err != nil {
			return err
		}
		progress("after start: %v", res.MemStart)
	}
	if startCPU != nil {
		if err := <-startCPU; err != nil {
			return err
		}
	}

	if res.Scrapes, err = measureScrapes(ctx, o, app, fw.pid, progress); err != nil {
		return err
	}
	if o.heap && o.scrapeCPU > 0 {
		if res.ScrapeProfiles, res.ScrapeCPUTop, res.ScrapeAllocTop, err = scrapeProfiles(ctx, o, app, res.Date); err != nil {
			return err
		}
	}

	mid := o.rules / 2
	rule := ruleName(mid)
	midVIP, _ := scaleVIP(mid)
	reads := [][]string{
		{"--version"}, // the reference: a CLI process that asks nothing
		{"status"},
		{"status", "--json"},
		{"backend", "list", "--json"},
		{"status", "--rule", rule},
		{"backend", "list", "--rule", rule, "--json"},
		{"backend", "list", "--vip", midVIP.String(), "--backend", ruleBackends(o, mid)[0].String()},
		{"backend", "list"},
		{"lookup", "--rule", rule, "--src", scaleClient},
	}
	if _, res.ReadsHWMBeforeMiB, err = rssMiB(fw.pid); err != nil {
		return err
	}
	if !o.jsonReads {
		reads = slices.DeleteFunc(reads, func(a []string) bool { return slices.Contains(a, "--json") })
	}
	// The same reads by xlbctl, where given: every xlb read above is run
	// by o.xlb, each of these by o.xlbctl.
	xlbReads := len(reads)
	if o.xlbctl != "" {
		reads = append(reads, []string{"--version"}, []string{"status"}, []string{"lookup", "--rule", rule, "--src", scaleClient})
	}
	for i, args := range reads {
		prog, bin := "xlb", o.xlb
		if i >= xlbReads {
			prog, bin = "xlbctl", o.xlbctl
		}
		r := Read{Command: prog + " " + strings.Join(args, " ")}
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", fw.pid), []byte("5"), 0); err != nil {
			return fmt.Errorf("reset the daemon's peak RSS: %w", err)
		}
		for range o.repeat {
			if err := ctx.Err(); err != nil {
				return err
			}
			run := args
			if args[0] != "--version" {
				run = append(slices.Clone(args), "-c", cfg)
			}
			d, _, n, rss, err := timedRSS(bin, run...)
			if err != nil {
				return err
			}
			r.All, r.Bytes, r.CLIMaxRSSMiB = append(r.All, d.Seconds()), n, max(r.CLIMaxRSSMiB, rss)
		}
		r.Sec = median(r.All)
		if _, r.DaemonPeakMiB, err = rssMiB(fw.pid); err != nil {
			return err
		}
		res.Reads = append(res.Reads, r)
		progress("%s: %.3f s (%d bytes, CLI peak RSS %.0f MiB, daemon peak RSS %.0f MiB)", r.Command, r.Sec, r.Bytes, r.CLIMaxRSSMiB, r.DaemonPeakMiB)
	}
	// Each read reset the peak: the peak over all of them is the largest.
	res.ReadsHWMAfterMiB = res.ReadsHWMBeforeMiB
	for _, r := range res.Reads {
		res.ReadsHWMAfterMiB = max(res.ReadsHWMAfterMiB, r.DaemonPeakMiB)
	}
	if res.LookupSocketSec, err = lookupOverSocket(ctx, filepath.Join(dir, "xlb.sock"), rule); err != nil {
		return err
	}
	progress("daemon peak RSS %.0f → %.0f MiB over the reads; lookup over the socket %.2f ms", res.ReadsHWMBeforeMiB, res.ReadsHWMAfterMiB, 1000*res.LookupSocketSec)

	// One change: one more backend in one rule, through its file.
	bs := ruleBackends(o, mid)
	added := poolAddr(o.pool) // in no rule
	file := filepath.Join(dir, "rules.d", rule+".toml")
	if err := os.WriteFile(file, []byte(ruleFile(o, mid, append(bs, added))), 0o644); err != nil {
		return err
	}
	if d, _, err = timed(o.xlb, "reload", "-c", cfg); err != nil {
		return err
	}
	res.ReloadSec = d.Seconds()
	line := fw.lastReload("", 5*time.Second)
	res.ReloadDaemon = logFields(line, "took")["took"]
	time.Sleep(time.Second)
	if res.RSSReloadMiB, _, err = rssMiB(fw.pid); err != nil {
		return err
	}
	progress("reload after adding %s to %s: %.3f s (in the daemon %s), RSS %.0f MiB", added, rule, res.ReloadSec, res.ReloadDaemon, res.RSSReloadMiB)
	if err := os.WriteFile(file, []byte(ruleFile(o, mid, bs)), 0o644); err != nil {
		return err
	}
	if d, _, err = timed(o.xlb, "reload", "-c", cfg); err != nil {
		return err
	}
	res.ReloadTwiceSec = d.Seconds()
	res.ReloadTwiceDaemon = logFields(fw.lastReload(line, 5*time.Second), "took")["took"]
	time.Sleep(time.Second)
	if res.RSSReload2MiB, _, err = rssMiB(fw.pid); err != nil {
		return err
	}
	progress("reload removing it again: %.3f s (in the daemon %s), RSS %.0f MiB", res.ReloadTwiceSec, res.ReloadTwiceDaemon, res.RSSReload2MiB)

	if d, _, err = timed(o.xlb, "backend", "drain", "-c", cfg, "--rule", rule, bs[0].String()); err != nil {
		return err
	}
	res.DrainSec = d.Seconds()
	if d, _, err = timed(o.xlb, "backend", "undrain", "-c", cfg, "--rule", rule, bs[0].String()); err != nil {
		return err
	}
	res.UndrainSec = d.Seconds()
	progress("backend drain %.3f s, undrain %.3f s", res.DrainSec, res.UndrainSec)

	if o.health == "TCP" {
		if err := probeCPU(ctx, o, fw.pid, probes, &res, progress); err != nil {
			return err
		}
	}
	if _, res.RSSHWMMiB, err = rssMiB(fw.pid); err != nil {
		return err
	}
	res.RSSHWMMiB = max(res.RSSHWMMiB, res.ReadsHWMAfterMiB) // the reads reset the peak
	res.FDsPeak, res.FDLimit = fdsPeak(), fdLimit(fw.pid)
	res.EMFILELines, res.LateProbesLines = fw.logCounts()
	progress("daemon descriptors: peak %d, limit %d; log lines: %d too many open files, %d probes late", res.FDsPeak, res.FDLimit, res.EMFILELines, res.LateProbesLines)

	if o.heap {
		if res.HeapProfile, res.HeapTop, err = heapProfile(app, o.out, res.Date, ""); err != nil {
			return err
		}
	}
	if o.restart {
		if err := measureRestart(ctx, o, cfg, filepath.Join(dir, "xlb.sock"), fw, &res, progress); err != nil {
			return err
		}
	}
	if store != nil {
		res.Systemd = store.summary()
		progress("systemd's fd store: %s", res.Systemd)
	}
	res.LoadAvgAfter = readTrim("/proc/loadavg")
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	name := filepath.Join(o.out, strings.ReplaceAll(res.Date, ":", "")+"-scale.json")
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(name, append(b, '\n'), 0o644); err != nil {
		return err
	}
	printScale(os.Stdout, &res)
	fmt.Fprintln(os.Stderr, "results:", name)
	return nil
}

// fdSample is how often watchFDs counts the daemon's descriptors.
const fdSample = 100 * time.Millisecond

// fdCounted, when set (tests do), is told each count a watchFDs started
// after it was set takes.
var fdCounted func(n int)

// watchFDs counts pid's open descriptors every fdSample until the returned
// function is called, which returns the most it counted.
func watchFDs(ctx context.Context, pid int) (stop func() int) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	counted := fdCounted
	done := make(chan struct{})
	peak := make(chan int, 1)
	go func() {
		most := 0
		tick := time.NewTicker(fdSample)
		defer tick.Stop()
		for {
			if f, err := os.Open(dir); err == nil {
				names, _ := f.Readdirnames(-1)
				f.Close()
				most = max(most, len(names))
				if counted != nil {
					counted(len(names))
				}
			}
			select {
			case <-tick.C:
			case <-done:
				peak <- most
				return
			case <-ctx.Done():
				peak <- most
				return
			}
		}
	}()
	var once sync.Once
	var most int
	return func() int {
		once.Do(func() { close(done); most = <-peak })
		return most
	}
}

// fdLimit is pid's soft limit of open files (0: unknown).
func fdLimit(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "Max open files"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return 0
}

// probeCPU waits until the daemon reports no backend without a verdict,
// then measures its CPU and the probes answered over the probe window.
func probeCPU(ctx context.Context, o scaleOptions, pid int, probes func() uint64, res *ScaleResults, progress func(string, ...any)) error {
	// Every probe answered once, or two intervals, whichever is later.
	deadline := time.Now().Add(2*o.interval + 30*time.Second)
	for probes() < uint64(o.pool) && time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := sleepCtx(ctx, o.interval); err != nil {
		return err
	}
	c0, err := procCPU(pid)
	if err != nil {
		return err
	}
	n0, t0 := probes(), time.Now()
	if err := sleepCtx(ctx, o.probeWindow); err != nil {
		return err
	}
	c1, err := procCPU(pid)
	if err != nil {
		return err
	}
	el := time.Since(t0).Seconds()
	res.ProbeWindowSec = el
	res.DaemonCPU = (c1 - c0).Seconds() / el
	res.ProbesPerSec = float64(probes()-n0) / el
	progress("health TCP: daemon CPU %.1f %% of one, %.0f probes/s over %.0f s", 100*res.DaemonCPU, res.ProbesPerSec, el)
	return nil
}

// heapProfile fetches the daemon's heap profile (in its namespace, by
// running this binary's `fetch` there) into <date>-scale[.what].heap.pb.gz
// and returns the file and the top of its in-use space.
func heapProfile(app, out, date, what string) (file string, top []string, err error) {
	if what != "" {
		what = "." + what
	}
	file = filepath.Join(out, strings.ReplaceAll(date, ":", "")+"-scale"+what+".heap.pb.gz")
	top, err = profile(app, file, "heap?gc=1", "-sample_index=inuse_space")
	return file, top, err
}

// startProfile takes a CPU profile of the daemon from as soon as its
// profile endpoint answers, over --start-cpu.
func startProfile(ctx context.Context, app string, o scaleOptions, res *ScaleResults) error {
	file := filepath.Join(o.out, strings.ReplaceAll(res.Date, ":", "")+"-scale.start.cpu.pb.gz")
	path := fmt.Sprintf("profile?seconds=%d", max(int(o.startCPU.Seconds()), 1))
	deadline := time.Now().Add(o.servingTimeout)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		top, err := profile(app, file, path, "")
		if err == nil {
			res.StartCPUProfile, res.StartCPUTop = file, top
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond) // the daemon is not listening yet
	}
}

// profile fetches /debug/pprof/<path> from the daemon into file and
// returns the top of `go tool pprof -top [index]`.
func profile(app, file, path, index string) ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, err
	}
	b, err := exec.Command("ip", "netns", "exec", app, self, "fetch", "http://"+scalePprof+"/debug/pprof/"+path).Output()
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", path, err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return nil, err
	}
	args := []string{"tool", "pprof", "-top", "-nodecount=25"}
	if index != "" {
		args = append(args, index)
	}
	out, err := exec.Command("go", append(args, file)...).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof %s: %w", file, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n"), nil
}

// logFields returns the values of the named keys of a logfmt line
// (key=value, values without spaces).
func logFields(line string, keys ...string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if ok && slices.Contains(keys, k) {
			out[k] = v
		}
	}
	return out
}

// memorySplit is where the daemon's resident memory is: the kernel's
// split of VmRSS (/proc/PID/status: RssAnon, RssShmem, RssFile) and the
// Go runtime's (the heap profile's MemStats: HeapInuse, HeapIdle −
// HeapReleased = free but held, Sys), in MiB.
func memorySplit(pid int, app string) (map[string]float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if f := strings.Fields(v); ok && len(f) == 2 && f[1] == "kB" && (k == "RssAnon" || k == "RssShmem" || k == "RssFile") {
			kb, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return nil, fmt.Errorf("proc status: %s: %w", k, err)
			}
			out[k] = kb / 1024
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	stats, err := exec.Command("ip", "netns", "exec", app, self, "fetch", "http://"+scalePprof+"/debug/pprof/heap?debug=1").Output()
	if err != nil {
		return nil, fmt.Errorf("fetch memstats: %w", err)
	}
	ms, err := parseMemStats(string(stats))
	if err != nil {
		return nil, err
	}
	for k, v := range ms {
		out[k] = v
	}
	return out, nil
}

// parseMemStats reads the runtime.MemStats lines of a debug=1 heap
// profile ("# HeapInuse = 123") into MiB: HeapInuse, HeapFree (HeapIdle −
// HeapReleased: the heap's free pages the runtime still holds), Sys.
func parseMemStats(text string) (map[string]float64, error) {
	v := map[string]float64{}
	for _, l := range strings.Split(text, "\n") {
		k, n, ok := strings.Cut(strings.TrimPrefix(l, "# "), " = ")
		if !ok || !strings.HasPrefix(l, "# ") {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(n), 64); err == nil {
			v[k] = f
		}
	}
	for _, k := range []string{"HeapInuse", "HeapIdle", "HeapReleased", "Sys"} {
		if _, ok := v[k]; !ok {
			return nil, fmt.Errorf("heap profile: no MemStats %s", k)
		}
	}
	const mib = 1 << 20
	return map[string]float64{"HeapInuse": v["HeapInuse"] / mib, "HeapFree": (v["HeapIdle"] - v["HeapReleased"]) / mib, "Sys": v["Sys"] / mib}, nil
}

// fetchMain is `xlbbench fetch URL`: the body to stdout (run inside a
// namespace by ip netns exec).
func fetchMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: xlbbench fetch URL")
		return 2
	}
	c := http.Client{Timeout: time.Minute}
	r, err := c.Get(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "xlbbench fetch:", err)
		return 1
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "xlbbench fetch:", r.Status)
		return 1
	}
	if _, err := io.Copy(os.Stdout, r.Body); err != nil {
		fmt.Fprintln(os.Stderr, "xlbbench fetch:", err)
		return 1
	}
	return 0
}

// signalContext ends on Ctrl-C or SIGTERM, so the deferred clean-up runs.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func printScale(w io.Writer, r *ScaleResults) {
	fmt.Fprintf(w, "%d rules × %d backends (%d distinct), %d queues, health %s, %s, load %s → %s\n",
		r.Rules, r.Backends, r.DistinctBackends, r.Queues, r.Health, r.Revision, r.LoadAvg, r.LoadAvgAfter)
	fmt.Fprintf(w, "| what | measured |\n|---|---|\n")
	fmt.Fprintf(w, "| `xlb validate` | %.2f s |\n", r.ValidateSec)
	if r.Systemd != "" {
		fmt.Fprintf(w, "| systemd's fd store (a stand-in) at the end | %s |\n", r.Systemd)
	}
	fmt.Fprintf(w, "| start → serving | %.2f s %v, %.2f s of CPU |\n", r.StartSec, r.StartPhases, r.StartCPUSec)
	fmt.Fprintf(w, "| daemon RSS after start | %.0f MiB |\n", r.RSSStartMiB)
	if len(r.MemStart) > 0 {
		keys := slices.Sorted(maps.Keys(r.MemStart))
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, r.MemStart[k]))
		}
		fmt.Fprintf(w, "| its split (MiB) | %s |\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "| `xlb reload` after adding one backend to one rule | %.3f s (in the daemon %s) |\n", r.ReloadSec, r.ReloadDaemon)
	fmt.Fprintf(w, "| RSS after that one reload | %.0f MiB |\n", r.RSSReloadMiB)
	fmt.Fprintf(w, "| `xlb reload` removing it again | %.3f s (in the daemon %s), RSS %.0f MiB |\n", r.ReloadTwiceSec, r.ReloadTwiceDaemon, r.RSSReload2MiB)
	fmt.Fprintf(w, "| `xlb backend drain` / `undrain` | %.3f s / %.3f s |\n", r.DrainSec, r.UndrainSec)
	for _, rd := range r.Reads {
		fmt.Fprintf(w, "| `%s` | %.3f s (%d bytes, CLI peak RSS %.0f MiB, daemon peak %.0f MiB) |\n", rd.Command, rd.Sec, rd.Bytes, rd.CLIMaxRSSMiB, rd.DaemonPeakMiB)
	}
	fmt.Fprintf(w, "| lookup over the control socket (no CLI) | %.2f ms |\n", 1000*r.LookupSocketSec)
	for _, sc := range r.Scrapes {
		q := sc.Query
		if q == "" {
			q = "(all)"
		}
		fmt.Fprintf(w, "| scrape `/metrics` %s | %.3f s, %d series, %d bytes (%d gzip), daemon CPU %.3f s, RSS %.0f → peak %.0f → %.0f MiB |\n",
			q, sc.Sec, sc.Series, sc.Bytes, sc.WireBytes, sc.DaemonCPUSec, sc.RSSBeforeMiB, sc.DaemonPeakMiB, sc.RSSAfterMiB)
	}
	fmt.Fprintf(w, "| daemon RSS peak before → after the reads | %.0f → %.0f MiB |\n", r.ReadsHWMBeforeMiB, r.ReadsHWMAfterMiB)
	fmt.Fprintf(w, "| daemon RSS peak (VmHWM) | %.0f MiB |\n", r.RSSHWMMiB)
	if r.Health == "TCP" {
		fmt.Fprintf(w, "| health TCP: probers for checked rule backends | %d for %d |\n", r.HealthTargets, r.HealthRuleBackends)
		fmt.Fprintf(w, "| health TCP: daemon CPU, probes/s | %.1f %% of one CPU, %.0f/s |\n", 100*r.DaemonCPU, r.ProbesPerSec)
	}
	if r.RestartSec > 0 {
		fmt.Fprintf(w, "| `xlb restart` | %.2f s, workers paused %.1f ms; eligible backends %d before, fewest %d over %v after, at most %d not HEALTHY |\n",
			r.RestartSec, r.RestartPauseMS, r.RestartEligibleBefore, r.RestartEligibleMin, restartWatch, r.RestartNotHealthyMax)
		fmt.Fprintf(w, "| `status --summary` during the restart | %d answered, %d failed, the longest wait %.0f ms |\n", r.RestartStatusAnswers, r.RestartStatusFailed, r.RestartStatusSlowestMS)
	}
	fmt.Fprintf(w, "| daemon descriptors: peak / limit | %d / %d (log lines: %d too many open files, %d probes late) |\n", r.FDsPeak, r.FDLimit, r.EMFILELines, r.LateProbesLines)
	if len(r.StartCPUTop) > 0 {
		fmt.Fprintf(w, "\nCPU of the start %s:\n%s\n", r.StartCPUProfile, strings.Join(r.StartCPUTop, "\n"))
	}
	if len(r.StartHeapTop) > 0 {
		fmt.Fprintf(w, "\nheap (in use) one second after start %s:\n%s\n", r.StartHeapProfile, strings.Join(r.StartHeapTop, "\n"))
	}
	if len(r.ScrapeCPUTop) > 0 {
		fmt.Fprintf(w, "\nCPU over full scrapes %s:\n%s\n", r.ScrapeProfiles[0], strings.Join(r.ScrapeCPUTop, "\n"))
		fmt.Fprintf(w, "\nallocations over them %s:\n%s\n", r.ScrapeProfiles[1], strings.Join(r.ScrapeAllocTop, "\n"))
	}
	if len(r.HeapTop) > 0 {
		fmt.Fprintf(w, "\nheap (in use) %s:\n%s\n", r.HeapProfile, strings.Join(r.HeapTop, "\n"))
	}
}

// lookupOverSocket asks the daemon for one flow of rule 20 times over its
// control socket and returns the median: the daemon's answer without a
// CLI process's start.
func lookupOverSocket(ctx context.Context, sock, rule string) (float64, error) {
	cl := control.NewClient(sock)
	defer cl.Close()
	var all []float64
	for range 20 {
		t0 := time.Now()
		if _, err := cl.Lookup(ctx, control.LookupQuery{Rule: rule, Src: scaleClient}); err != nil {
			return 0, fmt.Errorf("lookup over %s: %w", sock, err)
		}
		all = append(all, time.Since(t0).Seconds())
	}
	return median(all), nil
}

// restartWatch is how long measureRestart watches the successor.
const restartWatch = 5 * time.Second

// measureRestart runs `xlb restart` and reads the successor's summary
// every 250 ms for restartWatch: the fewest backends in their rules'
// eligible sets, and the most without a HEALTHY verdict (with health
// checks). The daemon's log keeps coming through fw, from the successor.
func measureRestart(ctx context.Context, o scaleOptions, cfg, sock string, fw *forwarder, res *ScaleResults, progress func(string, ...any)) error {
	cl := control.NewClient(sock)
	defer cl.Close()
	st, err := cl.Status(ctx, control.StatusQuery{Summary: true})
	if err != nil {
		return fmt.Errorf("status before the restart: %w", err)
	}
	res.RestartEligibleBefore = st.Summary.Eligible
	stop, asked := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(asked)
		res.RestartStatusAnswers, res.RestartStatusFailed, res.RestartStatusSlowestMS = statusMeanwhile(ctx, sock, stop)
	}()
	d, out, err := timed(o.xlb, "restart", "-c", cfg, "--json")
	close(stop)
	<-asked
	if err != nil {
		return err
	}
	var rr control.RestartResult
	if err := json.Unmarshal(out, &rr); err != nil {
		return fmt.Errorf("xlb restart --json: %w (%q)", err, out)
	}
	fw.handOver(rr.PID)
	res.RestartSec, res.RestartPauseMS = d.Seconds(), rr.PauseMS
	res.RestartEligibleMin = -1
	for end := time.Now().Add(restartWatch); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if err := ctx.Err(); err != nil {
			return err
		}
		st, err := cl.Status(ctx, control.StatusQuery{Summary: true})
		if err != nil {
			continue // a request racing the cut-over meets the predecessor's closing server
		}
		s := st.Summary
		if res.RestartEligibleMin < 0 || s.Eligible < res.RestartEligibleMin {
			res.RestartEligibleMin = s.Eligible
		}
		if o.health == "TCP" {
			res.RestartNotHealthyMax = max(res.RestartNotHealthyMax, s.Backends-s.Drained-s.Health["HEALTHY"])
		}
	}
	if res.RestartEligibleMin < 0 {
		return fmt.Errorf("no status from the successor (pid %d) within %v of the restart", rr.PID, restartWatch)
	}
	progress("xlb restart: %.2f s, workers paused %.1f ms; eligible %d before, fewest %d after, at most %d not HEALTHY; status meanwhile %d answered, %d failed, the longest wait %.0f ms",
		res.RestartSec, res.RestartPauseMS, res.RestartEligibleBefore, res.RestartEligibleMin, res.RestartNotHealthyMax, res.RestartStatusAnswers, res.RestartStatusFailed, res.RestartStatusSlowestMS)
	return nil
}

// statusMeanwhile asks the daemon on sock for its summary every 250 ms
// (each when the one before ended) until stop is closed, and returns how
// many answers came, how many requests failed, and the longest wait
// (ms), answered or not: a request still waiting when stop comes, or one
// that failed after waiting (the old daemon's server closing at the
// cut-over), is what a daemon that blocks its control goroutine shows.
func statusMeanwhile(ctx context.Context, sock string, stop <-chan struct{}) (answers, failed int, slowestMS float64) {
	cl := control.NewClient(sock)
	defer cl.Close()
	for {
		t0 := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := cl.Status(ctx, control.StatusQuery{Summary: true})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				answers++
			} else {
				failed++
			}
			slowestMS = max(slowestMS, float64(time.Since(t0).Microseconds())/1000)
		case <-stop:
			return answers, failed, max(slowestMS, float64(time.Since(t0).Microseconds())/1000)
		}
		select {
		case <-stop:
			return answers, failed, slowestMS
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// sleepCtx sleeps for d, or until ctx ends (an interrupt: the harness
// then removes what it made instead of sleeping out a long window).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
