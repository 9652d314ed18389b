package lab

import (
	"context"
	"encoding/json"
	"errors"
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
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/pkg/netns"
)

// The fleet's BGP numbering: the router is AS RouterAS, every appliance
// AS ApplianceAS (eBGP).
const (
	RouterAS    = 65000
	ApplianceAS = 65001
)

// Appliance is one appliance namespace: its one arm (XLBInterface) is a
// port of the router's bridge.
type Appliance struct {
	Index        int
	NS           *netns.NS
	Addr4, Addr6 netip.Addr // on the fabric: .2+Index, ::2+Index
	MAC          net.HardwareAddr
	RouterLink   string // the router's end of its veth (lb<Index>)
}

func applianceNS(i int) string {
	if i == 0 {
		return "xlb"
	}
	return "xlb" + strconv.Itoa(i)
}

func applianceRouterLink(i int) string {
	if i == 0 {
		return RouterApplianceLink
	}
	return "lb" + strconv.Itoa(i)
}

// birdProcess is BIRD running in the router namespace, a child of the
// process that called Up.
type birdProcess struct {
	cmd    *exec.Cmd
	dir    string // config, control socket, log
	exited chan struct{}
}

func (b *birdProcess) socket() string  { return filepath.Join(b.dir, "bird.ctl") }
func (b *birdProcess) logFile() string { return filepath.Join(b.dir, "bird.log") }

// ErrNoBIRD is returned by Up with BGP when the bird binary is missing.
var ErrNoBIRD = errors.New("BIRD 2 is not installed (the fleet lab's router runs it): apt-get install bird2")

// birdVIPFilter accepts host routes inside the VIPs' /24 and /64 (and
// Options.ExtraVIPs4).
func (l *Lab) birdVIPFilter(v6 bool) string {
	if v6 {
		return fmt.Sprintf("%s{128,128}", netip.PrefixFrom(l.Opts.VIP6, 64).Masked())
	}
	f := fmt.Sprintf("%s{32,32}", netip.PrefixFrom(l.Opts.VIP4, 24).Masked())
	if p := l.Opts.ExtraVIPs4; p.IsValid() && p.Addr().Is4() {
		f += fmt.Sprintf(", %s{32,32}", p.Masked())
	}
	return f
}

// BIRDConfig is the router's BIRD 2 configuration, as the fleet prototype
// found it: one kernel route per VIP with every appliance's path as a next hop
// ("merge paths on" in the kernel protocols is the only switch needed),
// eBGP with hold 3 s / keepalive 1 s (BGPHoldTime) and fast (re)connects,
// VIP host routes imported, nothing exported; with Options.BFD a protocol
// bfd and `bfd on` for every appliance.
func (l *Lab) BIRDConfig(logFile string) string {
	hold := int(l.BGPHoldTime() / time.Second)
	var b strings.Builder
	fmt.Fprintf(&b, `# BIRD 2 on the router of lab %q (written by pkg/lab)
log %q all;
router id %s;
timeformat protocol iso long;
debug protocols { states, events };

protocol device { scan time 10; }

# One kernel route per VIP with every equal best path as a next hop.
protocol kernel kvip4 {
  ipv4 { import none; export filter { if net ~ [ %s ] then accept; reject; }; };
  merge paths on limit 16;
}
protocol kernel kvip6 {
  ipv6 { import none; export filter { if net ~ [ %s ] then accept; reject; }; };
  merge paths on limit 16;
}

# Fast error waits: BIRD's default (60 s, then up to 300 s) would keep a
# returning appliance out for a minute after a hold-timer expiry.
template bgp appliance4 {
  local %s as %d;
  hold time %d; keepalive time %d;
  connect delay time 1; connect retry time 2; error wait time 1, 5;
  ipv4 { import filter { if net ~ [ %s ] then accept; reject; }; export none; };
}
template bgp appliance6 {
  local %s as %d;
  hold time %d; keepalive time %d;
  connect delay time 1; connect retry time 2; error wait time 1, 5;
  ipv6 { import filter { if net ~ [ %s ] then accept; reject; }; export none; };
}
`, l.Opts.Prefix, logFile, l.Gateway4, l.birdVIPFilter(false), l.birdVIPFilter(true),
		l.Gateway4, RouterAS, hold, hold/3, l.birdVIPFilter(false), l.Gateway6, RouterAS, hold, hold/3, l.birdVIPFilter(true))
	bfd := ""
	if l.Opts.BFD {
		// The fleet prototype's timers, 100 ms × 3, except the router's
		// own multiplier: it is the appliances' patience with the router
		// (they declare it silent after its multiplier × 100 ms), not the
		// router's with them (xlb's multiplier, 3: what the tests time).
		// The lab's router shares two loaded CPUs with everything else and
		// once went 300 ms without sending: both appliances closed their
		// BGP sessions at once and the VIP had no route. A real router
		// is not starved by the appliances' load (docs/design.md#bfd).
		b.WriteString(`
# BFD to every appliance: a silent one leaves ECMP in about 0.3 s (its
# multiplier 3 × 100 ms); the appliances wait 1 s (ours, 10 × 100 ms).
protocol bfd {
  interface "*" { min rx interval 100 ms; min tx interval 100 ms; multiplier 10; };
}
`)
		bfd = " bfd on;"
	}
	for _, a := range l.Appliances {
		fmt.Fprintf(&b, "protocol bgp a%dv4 from appliance4 { neighbor %s as %d;%s }\n", a.Index, a.Addr4, ApplianceAS, bfd)
		fmt.Fprintf(&b, "protocol bgp a%dv6 from appliance6 { neighbor %s as %d;%s }\n", a.Index, a.Addr6, ApplianceAS, bfd)
	}
	return b.String()
}

// routerHash sets the router's multipath hash to the 5-tuple, before its
// BGP daemon starts.
func (l *Lab) routerHash() error {
	// Policy 3 with fields 0x37 (source and destination address, protocol,
	// ports) hashes every packet on its 5-tuple. Policy 1 looks at the
	// socket hash first, which locally generated TCP carries across veth:
	// each connection would pick an appliance at random
	// (measured in the fleet prototype).
	return sysctls(l.Router, map[string]string{
		"net/ipv4/fib_multipath_hash_policy": "3",
		"net/ipv4/fib_multipath_hash_fields": "0x37",
		"net/ipv6/fib_multipath_hash_policy": "3",
		"net/ipv6/fib_multipath_hash_fields": "0x37",
		"net/ipv4/conf/all/rp_filter":        "0",
		"net/ipv4/conf/default/rp_filter":    "0",
	})
}

// routerNice starts the router's daemons (BIRD, FRR's zebra and bgpd)
// ahead of the tests' load on the shared CPUs, as a real router has CPUs
// of its own: at nice 0, beside a build loop (load 17 on two CPUs), FRR
// once sent and read no keepalive for the 3 s hold time and both
// appliances' sessions dropped at once (docs/design.md#bfd).
var routerNice = []string{"-n", "-10"}

// startBIRD sets the router's multipath hash to the 5-tuple and starts
// BIRD with BIRDConfig.
func (l *Lab) startBIRD() error {
	path, err := exec.LookPath("bird")
	if err != nil {
		return ErrNoBIRD
	}
	if err := l.routerHash(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "xlb-lab-bird-")
	if err != nil {
		return err
	}
	b := &birdProcess{dir: dir, exited: make(chan struct{})}
	conf := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(conf, []byte(l.BIRDConfig(b.logFile())), 0o644); err != nil {
		os.RemoveAll(dir)
		return err
	}
	b.cmd = l.Router.Command("nice", append(routerNice, path, "-f", "-c", conf, "-s", b.socket(), "-P", filepath.Join(dir, "bird.pid"))...)
	out := &strings.Builder{}
	b.cmd.Stdout, b.cmd.Stderr = out, out
	if err := b.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("start bird: %w", err)
	}
	go func() { b.cmd.Wait(); close(b.exited) }()
	l.bird = b
	l.onClose(l.stopBIRD)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := l.Birdc("show status"); err == nil {
			return nil
		}
		select {
		case <-b.exited:
			return fmt.Errorf("bird exited: %s", strings.TrimSpace(out.String()))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bird did not answer on %s within 10s: %s", b.socket(), strings.TrimSpace(out.String()))
		}
	}
}

// stopBIRD ends BIRD (the process Up started, by its pid) and removes its
// directory.
func (l *Lab) stopBIRD() {
	b := l.bird
	if b == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
	os.RemoveAll(b.dir)
}

// Birdc runs a birdc command against the router's BIRD and returns its
// output.
func (l *Lab) Birdc(args ...string) (string, error) {
	if l.bird == nil {
		return "", errors.New("lab runs no bird (Options.BGP)")
	}
	cmd := exec.Command("birdc", append([]string{"-s", l.bird.socket()}, strings.Fields(strings.Join(args, " "))...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// BIRDLog returns the router's BIRD log, for test failure messages.
func (l *Lab) BIRDLog() string {
	if l.bird == nil {
		return ""
	}
	b, _ := os.ReadFile(l.bird.logFile())
	return string(b)
}

// RouterReport is the router's BGP sessions and the tail of its daemon's
// log (BIRD or FRR), for test failure messages.
func (l *Lab) RouterReport() string {
	if l.frr != nil {
		sum, err := l.Vtysh("show bgp summary")
		return fmt.Sprintf("vtysh show bgp summary: %v\n%s\nfrr log (tail):\n%s", err, sum, logTail(l.FRRLog(), 40))
	}
	protos, err := l.Birdc("show protocols")
	return fmt.Sprintf("birdc show protocols: %v\n%s\nbird log (tail):\n%s", err, protos, logTail(l.BIRDLog(), 30))
}

func logTail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// RouteNexthops returns the gateways of the router's kernel route to vip
// (one per appliance announcing it, in the kernel's order), nil when there
// is none.
func (l *Lab) RouteNexthops(vip netip.Addr) ([]netip.Addr, error) {
	var out []netip.Addr
	err := l.Router.Do(func() error {
		fam := netlink.FAMILY_V4
		if vip.Is6() {
			fam = netlink.FAMILY_V6
		}
		dst := &net.IPNet{IP: vip.AsSlice(), Mask: net.CIDRMask(vip.BitLen(), vip.BitLen())}
		routes, err := netlink.RouteListFiltered(fam, &netlink.Route{Dst: dst}, netlink.RT_FILTER_DST)
		if err != nil {
			return fmt.Errorf("route list %s: %w", vip, err)
		}
		for _, r := range routes {
			if r.Gw != nil {
				a, _ := netip.AddrFromSlice(r.Gw)
				out = append(out, a.Unmap())
			}
			for _, nh := range r.MultiPath {
				if nh.Gw != nil {
					a, _ := netip.AddrFromSlice(nh.Gw)
					out = append(out, a.Unmap())
				}
			}
		}
		return nil
	})
	return out, err
}

// WaitNexthops polls the router's route to vip every 20 ms until its next
// hops are exactly want (any order; nil: no route), and returns how long
// that took.
func (l *Lab) WaitNexthops(ctx context.Context, vip netip.Addr, want []netip.Addr) (time.Duration, error) {
	start := time.Now()
	w := slices.Clone(want)
	slices.SortFunc(w, netip.Addr.Compare)
	var last []netip.Addr
	for {
		got, err := l.RouteNexthops(vip)
		if err != nil {
			return time.Since(start), err
		}
		slices.SortFunc(got, netip.Addr.Compare)
		if slices.Equal(got, w) {
			return time.Since(start), nil
		}
		last = got
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("route to %s: next hops %v, want %v: %w", vip, last, w, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// RouteWatch polls the router's route to a VIP until Stop and counts the
// polls in which it did not lead to exactly one appliance: what a
// hand-over test asserts never happens.
type RouteWatch struct {
	misses      atomic.Int64
	first, last atomic.Value // the first miss's time, the last miss's next hops
	done        chan struct{}
	wg          sync.WaitGroup
}

// WatchRoute starts a RouteWatch of vip, whose only next hop must be want,
// polled every interval.
func (l *Lab) WatchRoute(vip, want netip.Addr, every time.Duration) *RouteWatch {
	w := &RouteWatch{done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			select {
			case <-w.done:
				return
			case <-time.After(every):
			}
			if nh, err := l.RouteNexthops(vip); err != nil || len(nh) != 1 || nh[0] != want {
				if w.misses.Add(1) == 1 {
					w.first.Store(time.Now().Format("15:04:05.000"))
				}
				w.last.Store(fmt.Sprintf("%v %v", nh, err))
			}
		}
	}()
	return w
}

// Stop ends the watch and returns the polls that missed, when the first
// did and what the last saw ("" when none missed).
func (w *RouteWatch) Stop() (misses int64, first, last string) {
	close(w.done)
	w.wg.Wait()
	first, _ = w.first.Load().(string)
	last, _ = w.last.Load().(string)
	return w.misses.Load(), first, last
}

// ApplianceAddrs returns the appliances' fabric addresses of a family.
func (l *Lab) ApplianceAddrs(v6 bool) []netip.Addr {
	var out []netip.Addr
	for _, a := range l.Appliances {
		if v6 {
			out = append(out, a.Addr6)
		} else {
			out = append(out, a.Addr4)
		}
	}
	return out
}

// CountSYNs installs nftables counters in the router that count the TCP
// SYNs (new connections) it forwards to each appliance, by the route's
// next hop. Reset by calling it again.
func (l *Lab) CountSYNs() error {
	var b strings.Builder
	b.WriteString("table inet xlblab\ndelete table inet xlblab\ntable inet xlblab {\n")
	for _, a := range l.Appliances {
		fmt.Fprintf(&b, "  counter syn%d {}\n", a.Index)
	}
	b.WriteString("  chain count_syns {\n    type filter hook forward priority 0; policy accept;\n")
	for _, a := range l.Appliances {
		fmt.Fprintf(&b, "    meta nfproto ipv4 rt ip nexthop %s tcp flags & (syn | ack) == syn counter name syn%d\n", a.Addr4, a.Index)
		fmt.Fprintf(&b, "    meta nfproto ipv6 rt ip6 nexthop %s tcp flags & (syn | ack) == syn counter name syn%d\n", a.Addr6, a.Index)
	}
	b.WriteString("  }\n}\n")
	cmd := l.Router.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %w: %s", l.Router.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// SYNs reads the counters of CountSYNs: new connections the router sent to
// each appliance.
func (l *Lab) SYNs() ([]int, error) {
	out, err := l.Router.Output("nft", "-j", "list", "counters", "table", "inet", "xlblab")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Nftables []struct {
			Counter *struct {
				Name    string `json:"name"`
				Packets int    `json:"packets"`
			} `json:"counter"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("nft counters: %w", err)
	}
	res := make([]int, len(l.Appliances))
	for _, e := range doc.Nftables {
		if e.Counter == nil {
			continue
		}
		if i, err := strconv.Atoi(strings.TrimPrefix(e.Counter.Name, "syn")); err == nil && i >= 0 && i < len(res) {
			res[i] = e.Counter.Packets
		}
	}
	return res, nil
}

// ApplianceRouteGet asks the router which appliance a TCP flow from src:sport
// to vip:dport goes to (ip route get … iif, the forwarding lookup with the
// multipath hash), for tests that predict placement.
func (l *Lab) ApplianceRouteGet(src netip.AddrPort, vip netip.AddrPort) (netip.Addr, error) {
	args := []string{"route", "get", vip.Addr().String(), "from", src.Addr().String(), "iif", routerClientPort, "ipproto", "tcp", "sport", strconv.Itoa(int(src.Port())), "dport", strconv.Itoa(int(vip.Port()))}
	if vip.Addr().Is6() {
		args = append([]string{"-6"}, args...)
	}
	out, err := l.Router.Output("ip", args...)
	if err != nil {
		return netip.Addr{}, err
	}
	f := strings.Fields(out)
	for i := range f {
		if f[i] == "via" && i+1 < len(f) {
			return netip.ParseAddr(f[i+1])
		}
	}
	return netip.Addr{}, fmt.Errorf("ip route get: no via in %q", strings.TrimSpace(out))
}

// stopRouterDaemonsIn ends a BIRD, bgpd or zebra left running in namespace
// name by a lab process that crashed (Down): it would otherwise outlive
// the namespace. Only processes inside that namespace with one of those
// commands are signalled.
func stopRouterDaemonsIn(name string) {
	out, err := exec.Command("ip", "netns", "pids", name).Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && slices.Contains([]string{"bird", "bgpd", "zebra"}, strings.TrimSpace(string(comm))) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
}

// waitFleetRoutes waits (up to a minute) until the router routes both VIPs
// to every appliance, then starts counting SYNs per appliance (Demo).
func (l *Lab) waitFleetRoutes(ctx context.Context, out io.Writer) error {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, v6 := range []bool{false, true} {
		vip := l.Opts.VIP4
		if v6 {
			vip = l.Opts.VIP6
		}
		d, err := l.WaitNexthops(wctx, vip, l.ApplianceAddrs(v6))
		if err != nil {
			return fmt.Errorf("waiting for every appliance to announce: %w", err)
		}
		fmt.Fprintf(out, "lab %s: the router routes %s to %d appliances (after %v)\n", l.Opts.Prefix, vip, len(l.Appliances), d.Round(time.Millisecond))
	}
	return l.CountSYNs()
}

// writeApplianceTable prints the new connections the router sent to each
// appliance (the SYN counters of CountSYNs).
func (l *Lab) writeApplianceTable(w io.Writer) error {
	syns, err := l.SYNs()
	if err != nil {
		return err
	}
	total := 0
	for _, n := range syns {
		total += n
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "appliance\taddress\tconnections\tshare\t")
	for i, n := range syns {
		a := l.Appliances[i]
		share := 0.0
		if total > 0 {
			share = 100 * float64(n) / float64(total)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f%%\t\n", a.NS.Name, a.Addr4, n, share)
	}
	fmt.Fprintf(tw, "total\t\t%d\t\t\n", total)
	return tw.Flush()
}
