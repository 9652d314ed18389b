// Command xlbbench is the side-by-side benchmark behind bench/run: it
// builds a namespace topology (generator → appliance → two sinks that
// count and drop in XDP), then with the same offered load and packet mix
// measures a no-op AF_XDP reflector (the ceiling), xlb with established
// flows, xlb with new flows (SYNs from 2^16 sources) and nftables DNAT
// with jhash (the kernel peer), with 1 and 2 queues. For each point it
// records forwarded packets per second at the sinks, loss and the whole
// machine's CPU time per forwarded packet (/proc/stat), prints a table,
// writes bench/results/<UTC date>.json and PNG plots, and ends with one
// JSON summary line. See bench/README.md.
//
// `xlbbench reflect` is the reflector itself, which xlbbench starts in the
// appliance's namespace.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xlbnet/xlb/pkg/pktgen"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "reflect" {
		fs := flag.NewFlagSet("reflect", flag.ExitOnError)
		dev := fs.String("dev", "eth0", "interface")
		queues := fs.Int("queues", 1, "queues")
		macs := fs.String("sink-macs", "", "comma-separated sink MACs")
		fs.Parse(os.Args[2:])
		var hw []net.HardwareAddr
		for _, m := range strings.Split(*macs, ",") {
			a, err := net.ParseMAC(m)
			if err != nil {
				fmt.Fprintln(os.Stderr, "xlbbench reflect: --sink-macs:", err)
				os.Exit(2)
			}
			hw = append(hw, a)
		}
		if err := reflector(*dev, *queues, hw); err != nil {
			fmt.Fprintln(os.Stderr, "xlbbench reflect:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.BoolVar(&o.quick, "quick", false, "short run: 2 loads × 1.5 s per scenario and round (under 3 minutes)")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds: every scenario runs once per round, in turn, and each point reports the round with the median forwarded rate")
	flag.StringVar(&o.xlb, "xlb", "", "the xlb binary (required)")
	flag.StringVar(&o.out, "out", "bench/results", "directory for the JSON results and PNG plots")
	flag.StringVar(&o.queueList, "queues", "1,2", "queue counts to measure")
	flag.StringVar(&o.loadList, "loads", "", "offered loads in pps, 0 = as fast as the generator can (default: quick 100000,0; full 25000,50000,100000,200000,0)")
	flag.StringVar(&o.only, "scenarios", "", "comma-separated subset of reflector,xlb,xlb-newflows,nft (default: all)")
	flag.DurationVar(&o.duration, "duration", 0, "time per point (default: quick 2s, full 5s)")
	flag.Parse()
	if o.xlb == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: xlbbench --xlb PATH [--quick] [--out DIR] [--queues 1,2] [--loads PPS,...] [--duration D] [--rounds N]")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "xlbbench: needs root (network namespaces, XDP, AF_XDP, nftables)")
		os.Exit(2)
	}
	if err := o.setDefaults(); err != nil {
		fmt.Fprintln(os.Stderr, "xlbbench:", err)
		os.Exit(2)
	}
	// Ctrl-C or SIGTERM ends the run between measurements; the deferred
	// clean-up deletes the namespaces and stops the forwarders.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := benchmark(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "xlbbench:", err)
		os.Exit(1)
	}
}

type options struct {
	quick               bool
	rounds              int
	only                string
	xlb, out            string
	queueList, loadList string
	duration            time.Duration
	queues              []int
	loads               []float64
}

func (o *options) setDefaults() error {
	if o.loadList == "" {
		o.loadList = "25000,50000,100000,200000,0"
		if o.quick {
			o.loadList = "100000,0"
		}
	}
	if o.duration == 0 {
		o.duration = 5 * time.Second
		if o.quick {
			o.duration = 1500 * time.Millisecond
		}
	}
	if o.rounds < 1 {
		return fmt.Errorf("--rounds %d: want at least 1", o.rounds)
	}
	for _, s := range strings.Split(o.queueList, ",") {
		q, err := strconv.Atoi(s)
		if err != nil || q < 1 || q > 64 {
			return fmt.Errorf("--queues %q: want counts 1-64", o.queueList)
		}
		o.queues = append(o.queues, q)
	}
	for _, s := range strings.Split(o.loadList, ",") {
		l, err := strconv.ParseFloat(s, 64)
		if err != nil || l < 0 {
			return fmt.Errorf("--loads %q: want packets per second, 0 for as fast as possible", o.loadList)
		}
		o.loads = append(o.loads, l)
	}
	return nil
}

// The two packet mixes: 60-byte frames (64 on the wire) to the VIP's port.
var (
	// established: TCP ACKs of 4096 flows (256 clients × 16 ports), in turn.
	established = pktgen.Packet{Src: mustRange("198.51.100.0/24"), SrcPorts: pktgen.PortRange{Min: 40000, Max: 40015},
		Proto: pktgen.TCPACK, Flows: 4096, FlowLen: 1}
	// newFlows: TCP SYNs from 2^16 sources, each source once per cycle.
	newFlows = pktgen.Packet{Src: mustRange("198.19.0.0/16"), SrcPorts: pktgen.PortRange{Min: 1024, Max: 1024},
		Proto: pktgen.TCPSYN, Flows: 1 << 16, FlowLen: 1}
)

func mustRange(s string) pktgen.AddrRange {
	r, err := pktgen.ParseAddrRange(s)
	if err != nil {
		panic(err)
	}
	return r
}

// scenario is one forwarder under one mix.
type scenario struct {
	name  string
	mix   string
	start func(t *topo) (stop func() error, err error)
}

// Point is one measurement.
type Point struct {
	Scenario      string  `json:"scenario"`
	Round         int     `json:"round"`
	Mix           string  `json:"mix"`
	Queues        int     `json:"queues"`
	TargetPPS     float64 `json:"target_pps"` // 0: as fast as the generator can
	Sent          uint64  `json:"sent"`
	OfferedPPS    float64 `json:"offered_pps"`
	Forwarded     uint64  `json:"forwarded"`
	ForwardedPPS  float64 `json:"forwarded_pps"`
	Loss          float64 `json:"loss"`
	CPUBusy       float64 `json:"cpu_busy"` // busy CPUs (of all), averaged over the point
	CPUNsPerPkt   float64 `json:"cpu_ns_per_pkt"`
	CPUNsPerPktBg float64 `json:"cpu_ns_per_pkt_minus_background"`
}

// Results is the JSON file.
type Results struct {
	Date        string    `json:"date"`
	Kernel      string    `json:"kernel"`
	CPUs        int       `json:"cpus"`
	LoadAvg     string    `json:"loadavg_before"`
	Quick       bool      `json:"quick"`
	DurationSec float64   `json:"duration_per_point_sec"`
	Rounds      int       `json:"rounds"`
	Background  []float64 `json:"background_cpu_busy"` // per queue setting, before its scenarios
	Points      []Point   `json:"points"`              // per (scenario, queues, load): the round with the median forwarded rate
	RawPoints   []Point   `json:"raw_points"`          // every round`
	Summary     Summary   `json:"summary"`
}

// Summary is the final line (issue 6).
type Summary struct {
	XLBMpps           float64 `json:"xlb_mpps"`
	ReflectorMpps     float64 `json:"reflector_mpps"`
	NftMpps           float64 `json:"nft_mpps"`
	XLBVsReflector    float64 `json:"xlb_vs_reflector"`
	XLBVsNft          float64 `json:"xlb_vs_nft"`
	XLBCPUNsPerPkt    float64 `json:"xlb_cpu_ns_per_pkt"`
	NftCPUNsPerPkt    float64 `json:"nft_cpu_ns_per_pkt"`
	ReflectorCPUNsPkt float64 `json:"reflector_cpu_ns_per_pkt"`
	Queues            int     `json:"queues"`
}

func benchmark(ctx context.Context, o options) error {
	res := Results{Date: time.Now().UTC().Format("2006-01-02T15:04:05Z"), CPUs: numCPU(), Quick: o.quick, DurationSec: o.duration.Seconds(), Rounds: o.rounds}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		res.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.LoadAvg = strings.TrimSpace(string(b))
	}
	sk, err := newSink()
	if err != nil {
		return err
	}
	defer sk.Close()
	prefix := fmt.Sprintf("xb%d-", os.Getpid()%10000)
	scenarios := []scenario{
		{"reflector", "established", func(t *topo) (func() error, error) { return startReflector(t) }},
		{"xlb", "established", func(t *topo) (func() error, error) { return startXLB(t, o.xlb) }},
		{"xlb-newflows", "syn", func(t *topo) (func() error, error) { return startXLB(t, o.xlb) }},
		{"nft", "established", func(t *topo) (func() error, error) { return startNft(t) }},
	}
	if o.only != "" {
		var keep []scenario
		for _, sc := range scenarios {
			if slices.Contains(strings.Split(o.only, ","), sc.name) {
				keep = append(keep, sc)
			}
		}
		if len(keep) == 0 {
			return fmt.Errorf("--scenarios %q: none of reflector, xlb, xlb-newflows, nft", o.only)
		}
		scenarios = keep
	}
	fmt.Fprintf(os.Stderr, "%-13s %s %6s %12s %12s %14s %7s %9s %12s\n", "scenario", "r", "queues", "target pps", "offered pps", "forwarded pps", "loss", "cpu busy", "cpu ns/pkt")
	for _, q := range o.queues {
		t, err := newTopo(prefix, q)
		if err != nil {
			return fmt.Errorf("build topology: %w", err)
		}
		err = func() error {
			defer t.Close()
			for i := range nSinks {
				if err := sk.attach(t.ns(fmt.Sprintf("sink%d", i))); err != nil {
					return err
				}
			}
			bg := backgroundCPU(time.Second)
			res.Background = append(res.Background, bg)
			// Rounds interleave the scenarios, so each sees the same share
			// of whatever else the machine is doing.
			for round := 1; round <= o.rounds; round++ {
				for _, sc := range scenarios {
					pts, err := runScenario(ctx, t, sk, sc, o, bg, round)
					if err != nil {
						return fmt.Errorf("%s with %d queue(s), round %d: %w", sc.name, q, round, err)
					}
					res.RawPoints = append(res.RawPoints, pts...)
				}
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	res.Points = medians(res.RawPoints)
	res.Summary = summarize(res.Points, o.queues)
	if err := writeResults(o.out, &res); err != nil {
		return err
	}
	printTable(os.Stdout, res.Points)
	line, _ := json.Marshal(res.Summary)
	fmt.Println(string(line))
	return nil
}

func numCPU() int {
	n := 0
	b, _ := os.ReadFile("/proc/stat")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "cpu") && !strings.HasPrefix(l, "cpu ") {
			n++
		}
	}
	return n
}

// cpuStat returns the machine's busy and total time in jiffies (USER_HZ).
func cpuStat() (busy, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, s := range f[1:] {
		v, _ := strconv.ParseUint(s, 10, 64)
		if i >= 8 { // guest time is already in user
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

const jiffy = 10 * time.Millisecond // USER_HZ = 100 on Linux

// backgroundCPU is how many CPUs are busy with no traffic (other jobs).
func backgroundCPU(d time.Duration) float64 {
	b0, t0 := cpuStat()
	time.Sleep(d)
	b1, t1 := cpuStat()
	if t1 == t0 {
		return 0
	}
	return float64(b1-b0) / float64(t1-t0) * float64(numCPU())
}

func runScenario(ctx context.Context, t *topo, sk *sink, sc scenario, o options, bg float64, round int) ([]Point, error) {
	stop, err := sc.start(t)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop %s: %v\n", sc.name, err)
		}
	}()
	mix := established
	if sc.mix == "syn" {
		mix = newFlows
	}
	// Warm up (flows established, neighbours and bridge learned) and
	// check that the forwarder forwards at all.
	var warm Point
	for try := 0; try < 10; try++ {
		warm, err = measure(ctx, t, sk, mix, 20000, 500*time.Millisecond, 0)
		if err != nil {
			return nil, err
		}
		if warm.Forwarded > 0 {
			break
		}
	}
	if warm.Forwarded == 0 {
		return nil, errors.New("nothing reached the sinks during warm-up")
	}
	var pts []Point
	for _, load := range o.loads {
		p, err := measure(ctx, t, sk, mix, load, o.duration, bg)
		if err != nil {
			return nil, err
		}
		p.Scenario, p.Mix, p.Queues, p.Round = sc.name, sc.mix, t.queues, round
		fmt.Fprintf(os.Stderr, "%-13s %d %6d %12.0f %12.0f %14.0f %6.1f%% %9.2f %12.0f\n", p.Scenario, round, p.Queues, p.TargetPPS, p.OfferedPPS, p.ForwardedPPS, 100*p.Loss, p.CPUBusy, p.CPUNsPerPkt)
		pts = append(pts, p)
	}
	return pts, nil
}

// measure offers load (pps; 0 = as fast as possible) of mix for d and
// counts what reaches the sinks.
func measure(ctx context.Context, t *topo, sk *sink, mix pktgen.Packet, load float64, d time.Duration, bg float64) (Point, error) {
	if err := ctx.Err(); err != nil {
		return Point{}, fmt.Errorf("interrupted: %w", err)
	}
	genMAC, err := linkMAC(t.ns("gen"), "eth0")
	if err != nil {
		return Point{}, err
	}
	p := mix
	p.SrcMAC, p.DstMAC = genMAC, t.appMAC
	p.Dst = pktgen.AddrRange{First: netip.MustParseAddr(vipAddr), Last: netip.MustParseAddr(vipAddr)}
	p.DstPorts = pktgen.PortRange{Min: vipPort, Max: vipPort}
	cfg := pktgen.Config{Packet: p, Netns: t.ns("gen"), Ifname: "eth0", Threads: 1, FirstThread: 1 % numCPU(),
		Duration: d, Rate: load, Batch: 64, Bind: "copy"}
	s0, err := sk.packets()
	if err != nil {
		return Point{}, err
	}
	b0, t0 := cpuStat()
	rep, err := pktgen.Run(ctx, cfg)
	if err != nil {
		return Point{}, fmt.Errorf("generator: %w", err)
	}
	time.Sleep(100 * time.Millisecond) // let the forwarder drain
	b1, t1 := cpuStat()
	s1, err := sk.packets()
	if err != nil {
		return Point{}, err
	}
	r := rep.Results[0]
	el := r.Elapsed.Seconds()
	pt := Point{TargetPPS: load, Sent: r.Packets, Forwarded: s1 - s0}
	if el > 0 {
		pt.OfferedPPS = float64(r.Packets) / el
		pt.ForwardedPPS = float64(pt.Forwarded) / el
	}
	if r.Packets > 0 {
		pt.Loss = max(0, 1-float64(pt.Forwarded)/float64(r.Packets))
	}
	window := float64(t1-t0) / float64(numCPU()) * jiffy.Seconds() // wall seconds measured
	busyNs := float64(b1-b0) * float64(jiffy.Nanoseconds())
	if window > 0 {
		pt.CPUBusy = float64(b1-b0) * jiffy.Seconds() / window
	}
	if pt.Forwarded > 0 {
		pt.CPUNsPerPkt = busyNs / float64(pt.Forwarded)
		pt.CPUNsPerPktBg = max(0, busyNs-bg*window*1e9) / float64(pt.Forwarded)
	}
	return pt, nil
}

// startReflector runs `xlbbench reflect` in the appliance namespace.
func startReflector(t *topo) (func() error, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var macs []string
	for _, m := range t.sinkMAC {
		macs = append(macs, m.String())
	}
	cmd := exec.Command("ip", "netns", "exec", t.ns("app"), self, "reflect", "--dev", "eth0",
		"--queues", strconv.Itoa(t.queues), "--sink-macs", strings.Join(macs, ","))
	return startAndWait(cmd, "reflector ready", nil)
}

// startXLB writes a configuration (one TCP rule for the VIP's port, DIRECT
// to the two sinks, no health probes) and runs `xlb run` in the appliance.
func startXLB(t *topo, xlb string) (func() error, error) {
	dir, err := os.MkdirTemp("", "xlbbench-")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "rules.d"), 0o755); err != nil {
		return nil, err
	}
	main := fmt.Sprintf(`# written by xlbbench
interface = "eth0"
queues = "all"
hash_seed = "0x1ab5eed"
rules_dir = "rules.d"
state_file = %q
control_socket = %q
metrics_listen = ""
[conntrack]
max_entries = 1048576
`, filepath.Join(dir, "state.toml"), filepath.Join(dir, "xlb.sock"))
	var backends []string
	for i := range nSinks {
		backends = append(backends, strconv.Quote(sinkAddr(i)))
	}
	rule := fmt.Sprintf(`name = "bench"
vip = %q
protocol = "TCP"
ports = ["%d"]

[encap]
type = "DIRECT"

[health_check]
type = "NONE"

[[group]]
name = "sinks"
backends = [%s]
`, vipAddr, vipPort, strings.Join(backends, ", "))
	cfg := filepath.Join(dir, "xlb.toml")
	if err := os.WriteFile(cfg, []byte(main), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.d", "bench.toml"), []byte(rule), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", "netns", "exec", t.ns("app"), xlb, "run", "-c", cfg)
	return startAndWait(cmd, "msg=serving", func() { os.RemoveAll(dir) })
}

// startAndWait starts cmd and waits for a line containing ready on its
// stdout or stderr; stop sends SIGTERM and waits.
func startAndWait(cmd *exec.Cmd, ready string, cleanup func()) (func() error, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pw.Close()
		pr.Close()
		return nil, err
	}
	pw.Close()
	var log strings.Builder
	readyCh := make(chan struct{})
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		closed := false
		for sc.Scan() {
			if log.Len() < 1<<16 {
				log.WriteString(sc.Text() + "\n")
			}
			if !closed && strings.Contains(sc.Text(), ready) {
				close(readyCh)
				closed = true
			}
		}
		exited <- cmd.Wait()
		pr.Close()
	}()
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			exited <- err
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if cleanup != nil {
			cleanup()
		}
		return nil
	}
	select {
	case <-readyCh:
		return stop, nil
	case err := <-exited:
		exited <- err
		if cleanup != nil {
			cleanup()
		}
		return nil, fmt.Errorf("%s exited before it was ready (%v):\n%s", cmd.Args[4], err, log.String())
	case <-time.After(60 * time.Second):
		stop()
		return nil, fmt.Errorf("%s not ready within 60s:\n%s", cmd.Args[4], log.String())
	}
}

// startNft loads the kernel peer: DNAT of the VIP's port to the sinks by
// jhash of the client's address and port, as kube-proxy's nftables mode
// spreads a service over its endpoints.
func startNft(t *topo) (func() error, error) {
	var elems []string
	for i := range nSinks {
		elems = append(elems, fmt.Sprintf("%d : %s", i, sinkAddr(i)))
	}
	ruleset := fmt.Sprintf(`table ip xlbbench {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr %s tcp dport %d dnat to jhash ip saddr . tcp sport mod %d seed 0x1ab5eed map { %s }
	}
}
`, vipAddr, vipPort, nSinks, strings.Join(elems, ", "))
	cmd := exec.Command("ip", "netns", "exec", t.ns("app"), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("nft -f: %w: %s", err, out)
	}
	// conntrack is loaded now; give it room for every flow.
	_ = sysctl(t.ns("app"), "net.netfilter.nf_conntrack_max=1048576")
	return func() error {
		return run("ip", "netns", "exec", t.ns("app"), "nft", "delete", "table", "ip", "xlbbench")
	}, nil
}
