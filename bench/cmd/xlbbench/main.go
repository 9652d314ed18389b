// Command xlbbench is the side-by-side benchmark behind bench/run: it
// builds a namespace topology (generator → appliance → two sinks that
// count and drop in XDP), then with the same offered load and packet mix
// measures a no-op AF_XDP reflector (the ceiling), xlb with established
// flows, xlb with new flows (SYNs from 2^16 sources) and nftables DNAT
// with jhash (the kernel peer), with 1 and 2 queues. For each point it
// records forwarded packets per second at the sinks, loss and the whole
// machine's CPU time per forwarded packet (/proc/stat), the forwarder
// process's own CPU time per forwarded packet (/proc/PID/stat), prints a table,
// writes bench/results/<UTC date>.json and PNG plots, and ends with one
// JSON summary line. See bench/README.md.
//
// `xlbbench reflect` is the reflector itself, which xlbbench starts in the
// appliance's namespace. `xlbbench scale` (bench/scale) measures the
// control plane instead: a real `xlb run` with N rules × M backends
// (scale.go); `xlbbench fetch URL` is its HTTP client inside a namespace.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/pktgen"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "scale" {
		os.Exit(scaleMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "rusage" {
		os.Exit(rusageMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "fetch" {
		os.Exit(fetchMain(os.Args[2:]))
	}
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
	flag.StringVar(&o.only, "scenarios", "", "comma-separated subset of reflector,xlb,xlb-newflows,nft,xlb-base (default: all)")
	flag.StringVar(&o.xlbBase, "xlb-base", "", "a second xlb binary (e.g. the build before a change), measured as scenario xlb-base in every round beside xlb: an A/B in one run")
	flag.StringVar(&o.xlbConfig, "xlb-config", "", "lines appended to the xlb.toml of the xlb and xlb-newflows scenarios only (e.g. 'busy_poll = \"50us\"'): with --xlb-base naming the same binary, an A/B of a setting in one run")
	flag.BoolVar(&o.profile, "profile", false, "after the rounds, profile xlb (and xlb-base) at the max load of each queue count with perf(1); the top entries go into the JSON")
	flag.DurationVar(&o.duration, "duration", 0, "time per point (default: quick 2s, full 5s)")
	flag.BoolVar(&o.keepTHP, "keep-shmem-thp", false, "measure under the kernel's shmem THP setting as it is, instead of setting advise for the run (the appliance's unit sets it; the previous value is restored)")
	flag.Parse()
	if o.xlb == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: xlbbench --xlb PATH [--xlb-base PATH] [--xlb-config LINES] [--quick] [--profile] [--out DIR] [--queues 1,2] [--loads PPS,...] [--duration D] [--rounds N] [--scenarios LIST]")
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
	xlbBase             string
	xlbConfig           string
	profile             bool
	keepTHP             bool
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

// scenario is one forwarder under one mix. profile marks the scenarios
// --profile records.
type scenario struct {
	name    string
	mix     string
	profile bool
	start   func(t *topo) (*forwarder, error)
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
	// The forwarder process's own CPU time (utime + stime from
	// /proc/PID/stat, all its threads) over the point, and per forwarded
	// packet; zero for nft, which has no process.
	ProcCPUSec   float64 `json:"proc_cpu_sec,omitempty"`
	ProcNsPerPkt float64 `json:"proc_ns_per_pkt,omitempty"`
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
	ShmemTHP    string    `json:"shmem_thp"`           // the kernel's shmem THP mode during the run (the conntrack arenas' pages)
	Background  []float64 `json:"background_cpu_busy"` // per queue setting, before its scenarios
	Points      []Point   `json:"points"`              // per (scenario, queues, load): the round with the median forwarded rate
	RawPoints   []Point   `json:"raw_points"`          // every round
	Profiles    []Profile `json:"profiles,omitempty"`  // --profile: one extra max-load point per profiled scenario and queue count
	Summary     Summary   `json:"summary"`
}

// Summary is the final line (bench/README.md §3). The first fields are at the
// queue count where xlb forwarded most; the *_1q fields at one queue.
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
	// The forwarder processes' own CPU per forwarded packet at max load,
	// one queue, and xlb's forwarded rate over the reflector's
	// there.
	XLBProcNsPerPkt       float64 `json:"xlb_proc_ns_per_pkt"`
	ReflectorProcNsPerPkt float64 `json:"reflector_proc_ns_per_pkt"`
	XLBVsReflector1Q      float64 `json:"xlb_vs_reflector_1q"`
	// With --xlb-base: the same figures of the base binary, at one queue.
	BaseProcNsPerPkt    float64 `json:"xlb_base_proc_ns_per_pkt,omitempty"`
	BaseVsReflector1Q   float64 `json:"xlb_base_vs_reflector_1q,omitempty"`
	XLBVsBase1Q         float64 `json:"xlb_vs_base_1q,omitempty"`
	XLBProcVsBaseProc1Q float64 `json:"xlb_proc_vs_base_proc_1q,omitempty"`
}

func benchmark(ctx context.Context, o options) error {
	res := Results{Date: time.Now().UTC().Format("2006-01-02T15:04:05Z"), CPUs: numCPU(), Quick: o.quick, DurationSec: o.duration.Seconds(), Rounds: o.rounds}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		res.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.LoadAvg = strings.TrimSpace(string(b))
	}
	if !o.keepTHP {
		// What deploy/systemd/xlb.service does: the conntrack arenas
		// (memfds) get huge pages only where shmem THP honours advice.
		release, err := conntrack.AdviseShmemTHP()
		if err != nil {
			return fmt.Errorf("shmem thp (--keep-shmem-thp to run without): %w", err)
		}
		defer func() {
			if err := release(); err != nil {
				fmt.Fprintln(os.Stderr, "xlbbench:", err)
			}
		}()
	}
	res.ShmemTHP = conntrack.ShmemTHP()
	sk, err := newSink()
	if err != nil {
		return err
	}
	defer sk.Close()
	prefix := fmt.Sprintf("xb%d-", os.Getpid()%10000)
	scenarios := []scenario{
		{"reflector", "established", false, func(t *topo) (*forwarder, error) { return startReflector(t) }},
		{"xlb", "established", true, func(t *topo) (*forwarder, error) { return startXLB(t, o.xlb, o.xlbConfig) }},
	}
	if o.xlbBase != "" {
		scenarios = append(scenarios, scenario{"xlb-base", "established", true, func(t *topo) (*forwarder, error) { return startXLB(t, o.xlbBase, "") }})
	}
	scenarios = append(scenarios,
		scenario{"xlb-newflows", "syn", false, func(t *topo) (*forwarder, error) { return startXLB(t, o.xlb, o.xlbConfig) }},
		scenario{"nft", "established", false, func(t *topo) (*forwarder, error) { return startNft(t) }})
	if o.only != "" {
		var keep []scenario
		for _, sc := range scenarios {
			if slices.Contains(strings.Split(o.only, ","), sc.name) {
				keep = append(keep, sc)
			}
		}
		if len(keep) == 0 {
			return fmt.Errorf("--scenarios %q: none of reflector, xlb, xlb-base, xlb-newflows, nft", o.only)
		}
		scenarios = keep
	}
	fmt.Fprintf(os.Stderr, "%-13s %s %6s %12s %12s %14s %7s %9s %12s %12s\n", "scenario", "r", "queues", "target pps", "offered pps", "forwarded pps", "loss", "cpu busy", "cpu ns/pkt", "proc ns/pkt")
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
			if !o.profile {
				return nil
			}
			for _, sc := range scenarios {
				if !sc.profile {
					continue
				}
				p, err := profileScenario(ctx, t, sk, sc, o, bg, res.Date)
				if err != nil {
					return fmt.Errorf("profile %s with %d queue(s): %w", sc.name, q, err)
				}
				res.Profiles = append(res.Profiles, p)
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
	for _, p := range res.Profiles {
		printProfile(os.Stdout, p)
	}
	line, _ := json.Marshal(res.Summary)
	fmt.Println(string(line))
	return nil
}
