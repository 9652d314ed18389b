package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/packettest"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// backgroundTraffic drives HTTP requests over IPv4 until the test ends.
func backgroundTraffic(t *testing.T, l *lab.Lab) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			l.Drive(ctx, lab.DriveOptions{Requests: 100, Concurrency: 4, Family: 4})
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// injectFrames sends raw Ethernet frames to the appliance from the
// router's end of its link (the kernel checks nothing on the way out, so
// malformed packets reach xlb as they are).
func injectFrames(t *testing.T, l *lab.Lab, frames [][]byte) {
	t.Helper()
	a := l.Appliances[0]
	err := l.Router.Do(func() error {
		ifi, err := net.InterfaceByName(a.RouterLink)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
		copy(sa.Addr[:], a.MAC)
		for _, f := range frames {
			if err := unix.Sendto(fd, f, 0, sa); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("inject: %v", err)
	}
}

// malformed returns n frames to the lab's VIP that xlb's parser refuses
// for reason: "ipv4-bad-checksum" or "bad-tcp-flags".
func malformed(l *lab.Lab, reason string, n int) [][]byte {
	var out [][]byte
	for i := range n {
		s := packettest.Spec{SrcMAC: l.GatewayMAC, DstMAC: l.XLBMAC, Src: l.ClientAddrs4[i%len(l.ClientAddrs4)], Dst: l.Opts.VIP4,
			Proto: layers.IPProtocolTCP, SrcPort: uint16(50000 + i), DstPort: l.Opts.HTTPPort, ACK: true, Payload: []byte("malformed")}
		if reason == "bad-tcp-flags" {
			s.SYN, s.FIN, s.ACK = true, true, false
		}
		f := packettest.Frame(s)
		if reason == "ipv4-bad-checksum" {
			f[14+10] ^= 0x5a
		}
		out = append(out, f)
	}
	return out
}

// readPcapNG reads every packet of a pcapng file with gopacket, with the
// name of the interface each came on.
func readPcapNG(t *testing.T, data []byte) (pkts []gopacket.Packet, ifaces []string) {
	t.Helper()
	r, err := pcapgo.NewNgReader(bytes.NewReader(data), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatalf("pcapng: %v", err)
	}
	for {
		d, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		intf, err := r.Interface(ci.InterfaceIndex)
		if err != nil {
			t.Fatal(err)
		}
		pkts = append(pkts, gopacket.NewPacket(d, layers.LayerTypeEthernet, gopacket.Default))
		ifaces = append(ifaces, intf.Name)
	}
	return pkts, ifaces
}

// ipv4Layers returns a packet's IPv4 headers, outer first.
func ipv4Layers(p gopacket.Packet) []*layers.IPv4 {
	var out []*layers.IPv4
	for _, l := range p.Layers() {
		if ip, ok := l.(*layers.IPv4); ok {
			out = append(out, ip)
		}
	}
	return out
}

// tshark runs tshark with stdin and returns its standard output (it
// warns about running as root on stderr).
func tshark(stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.Command("tshark", args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("tshark %v: %v\n%s", args, err, stderr.String())
	}
	return out, nil
}

func TestEndToEndCapture(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 2})
	rules := l.DefaultRules("IPIP")[:1]
	rules[0].Health = healthNone
	x := xlbIn(t, l, rules)
	backgroundTraffic(t, l)
	vip := l.Opts.VIP4.String()
	tunnels := map[string]bool{}
	for _, b := range l.Backends {
		tunnels[b.Tunnel4.String()] = true
	}
	capture := func(args ...string) (string, []byte) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "capture.pcapng")
		_, stderr, err := runXLB(t, append([]string{"capture", "--socket", x.Socket(), "--duration", "90s", "-w", file}, args...)...)
		if err != nil {
			t.Fatalf("xlb capture %v: %v\n%s", args, err, stderr)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return file, data
	}
	for _, point := range []string{"rx", "tx", "both"} {
		t.Run(point, func(t *testing.T) {
			file, data := capture("--point", point, "--count", "100")
			pkts, ifaces := readPcapNG(t, data)
			if len(pkts) != 100 {
				t.Fatalf("%d packets in the file, want 100", len(pkts))
			}
			seen := map[string]int{}
			for i, p := range pkts {
				seen[ifaces[i]]++
				ips := ipv4Layers(p)
				tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
				switch ifaces[i] {
				case "rx:tx": // as received: client → VIP
					if len(ips) != 1 || ips[0].DstIP.String() != vip || tcp == nil || int(tcp.DstPort) != int(l.Opts.HTTPPort) {
						t.Fatalf("packet %d (rx): %v", i, p)
					}
				case "tx:tx": // as sent: appliance → backend, around client → VIP
					if len(ips) != 2 || ips[0].SrcIP.String() != l.XLBAddr4.String() || !tunnels[ips[0].DstIP.String()] ||
						ips[0].Protocol != layers.IPProtocolIPv4 || ips[1].DstIP.String() != vip || tcp == nil || int(tcp.DstPort) != int(l.Opts.HTTPPort) {
						t.Fatalf("packet %d (tx): %v", i, p)
					}
				default:
					t.Fatalf("packet %d on interface %q: not forwarded traffic", i, ifaces[i])
				}
			}
			t.Logf("interfaces: %v", seen)
			if point != "tx" && seen["rx:tx"] == 0 || point != "rx" && seen["tx:tx"] == 0 {
				t.Errorf("point %s: interfaces %v", point, seen)
			}
			t.Run("tshark", func(t *testing.T) {
				if _, err := exec.LookPath("tshark"); err != nil {
					t.Skip("skipped: tshark is not installed (.ci/run installs it)")
				}
				out, err := tshark(nil, "-r", file, "-T", "fields", "-e", "frame.interface_name", "-e", "tcp.dstport")
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSpace(string(out)), "\n")
				if len(lines) != 100 || !strings.Contains(string(out), fmt.Sprintf("\t%d", l.Opts.HTTPPort)) {
					t.Errorf("tshark read %d lines:\n%s", len(lines), out)
				}
			})
		})
	}

	t.Run("drops with their reason, piped to tshark", func(t *testing.T) {
		// Malformed packets injected while a capture of drops runs.
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 40 {
				time.Sleep(100 * time.Millisecond)
				injectFrames(t, l, malformed(l, "ipv4-bad-checksum", 1))
			}
		}()
		var out, errOut bytes.Buffer
		app := newApp(&out, &errOut)
		err := app.Run([]string{"xlb", "capture", "--socket", x.Socket(), "--verdict", "drop", "--reason", "ipv4-bad-checksum", "--point", "rx", "--count", "5", "--duration", "60s", "-w", "-"})
		<-done
		if err != nil {
			t.Fatalf("%v\n%s", err, errOut.String())
		}
		pkts, ifaces := readPcapNG(t, out.Bytes())
		if len(pkts) != 5 {
			t.Fatalf("%d packets, want 5", len(pkts))
		}
		for i := range pkts {
			if ifaces[i] != "rx:drop:ipv4-bad-checksum" {
				t.Errorf("packet %d on %q", i, ifaces[i])
			}
		}
		if _, err := exec.LookPath("tshark"); err != nil {
			t.Skip("skipped the pipe into tshark: tshark is not installed (.ci/run installs it)")
		}
		got, err := tshark(out.Bytes(), "-r", "-", "-T", "fields", "-e", "frame.interface_name", "-e", "ip.dst")
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(got), "rx:drop:ipv4-bad-checksum\t"+l.Opts.VIP4.String()); n != 5 {
			t.Errorf("tshark -r - saw %d dropped packets:\n%s", n, got)
		}
	})

	t.Run("listing", func(t *testing.T) {
		stdout, stderr, err := runXLB(t, "capture", "--socket", x.Socket(), "--count", "10", "--duration", "60s", "--backend", l.Backends[1].Tunnel4.String(), "--point", "tx")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if len(lines) != 10 {
			t.Fatalf("%d lines:\n%s", len(lines), stdout)
		}
		for _, line := range lines {
			if !strings.Contains(line, " tx tx rule web4 → "+l.Backends[1].Tunnel4.String()) || !strings.Contains(line, "IPv4 "+l.XLBAddr4.String()+" > "+l.Backends[1].Tunnel4.String()) {
				t.Errorf("line %q", line)
			}
		}
		if !strings.Contains(stderr, "xlb capture: 10 packets (ended by count)") {
			t.Errorf("stderr %q", stderr)
		}
	})
}

// metricValues parses a scrape into name{labels} → value (labels as
// client_golang writes them: sorted by name).
func metricValues(body string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		var v float64
		if _, err := fmt.Sscan(line[i+1:], &v); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// sumMetric adds every sample of name whose labels contain all of want
// ("reason=\"no-rule\"").
func sumMetric(m map[string]float64, name string, want ...string) float64 {
	total := 0.0
	for k, v := range m {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(k, w)
		}
		if ok {
			total += v
		}
	}
	return total
}

// scrapeBody returns the body of a scrape (without the HTTP head).
func scrapeBody(t *testing.T, l *lab.Lab) string {
	t.Helper()
	raw := scrape(t, l)
	if i := strings.Index(raw, "\r\n\r\n"); i >= 0 {
		return raw[i+4:]
	}
	t.Fatalf("scrape without a body:\n%s", raw)
	return ""
}

// TestEndToEndStatistics: during lab traffic the metrics and status --json
// agree with what was sent: the connections the clients made are the new
// connections counted, spread over the backends as the backends saw them;
// packets per backend sum to the packets forwarded; injected malformed
// packets appear under their drop reason; connections kept open are active
// and fall to 0 once the clients close them; a scrape passes
// client_golang's linter (promtool check metrics' checks).
func TestEndToEndStatistics(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 2})
	rules := l.DefaultRules("IPIP")[:1]
	x := xlbIn(t, l, rules)
	waitHealth(t, l, x, "web4", "HEALTHY", 0, 1)
	sock := x.Socket()
	backendIdx := map[string]int{}
	for i, b := range l.Backends {
		backendIdx[b.Tunnel4.String()] = i
	}
	rule := func(st control.Status) control.Rule { return ruleStatus(t, st, "web4") }
	before := statusJSON(t, sock)

	// Traffic: 300 connections, one request each.
	const requests = 300
	res := drive(t, l, requests, 4)
	if !res.OK() {
		t.Fatalf("%d of %d requests failed: %v", res.Errors, requests, res.FirstError)
	}
	// Malformed packets to the VIP: dropped by the parser, under their reasons.
	injectFrames(t, l, malformed(l, "ipv4-bad-checksum", 7))
	injectFrames(t, l, malformed(l, "bad-tcp-flags", 5))
	// Connections kept open: active until the clients close them.
	var keep []*keepConn
	for _, src := range l.ClientAddrs4[:8] {
		k, err := dialKeep(l, src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.get(); err != nil {
			t.Fatal(err)
		}
		keep = append(keep, k)
	}
	var st control.Status
	testutil.WaitFor(t, 20*time.Second, "the drops counted", func() (bool, string) {
		st = statusJSON(t, sock)
		d := st.Counters.Drops
		return d["ipv4-bad-checksum"]-before.Counters.Drops["ipv4-bad-checksum"] == 7 && d["bad-tcp-flags"]-before.Counters.Drops["bad-tcp-flags"] == 5, fmt.Sprint(d)
	})

	r, r0 := rule(st), rule(before)
	// New connections: every connection the clients opened, on the
	// backend that answered it.
	if got := r.NewConnections - r0.NewConnections; got != requests+int64(len(keep)) {
		t.Errorf("rule new connections +%d, want %d (%d requests + %d kept connections)", got, requests+len(keep), requests, len(keep))
	}
	perBackend := make([]int64, len(l.Backends))
	var pkts int64
	for i, b := range r.Backends {
		idx, ok := backendIdx[b.Address]
		if !ok {
			t.Fatalf("status backend %s is not a lab backend", b.Address)
		}
		perBackend[idx] = b.NewConnections - r0.Backends[i].NewConnections
		pkts += b.Packets
		if b.Bytes < b.Packets*40 {
			t.Errorf("backend %s: %d bytes for %d packets", b.Address, b.Bytes, b.Packets)
		}
		if b.LastCheck == nil || b.HealthSince == nil || b.ProbeLatencySeconds <= 0 {
			t.Errorf("backend %s: no health-check history: %+v", b.Address, b.CheckInfo)
		}
	}
	t.Logf("new connections per backend %v; backends answered %v (+%d kept)", perBackend, res.PerBackend, len(keep))
	for i, n := range res.PerBackend {
		if perBackend[i] < int64(n) || perBackend[i] > int64(n+len(keep)) {
			t.Errorf("be%d answered %d requests but status counts %d new connections to it", i, n, perBackend[i])
		}
	}
	if pkts != r.Packets || r.Packets < 3*(requests+int64(len(keep))) {
		t.Errorf("rule packets %d, its backends' %d; want equal and ≥ 3 per connection", r.Packets, pkts)
	}
	if r.ActiveConnections < len(keep) {
		t.Errorf("%d active connections with %d kept open", r.ActiveConnections, len(keep))
	}

	// Metrics, taken when nothing moves: they agree with status and
	// with themselves.
	m := metricValues(scrapeBody(t, l))
	st = statusJSON(t, sock)
	r = rule(st)
	tx := sumMetric(m, "xlb_verdict_packets_total", `verdict="tx"`)
	if be := sumMetric(m, "xlb_backend_packets_total"); be != tx || be != float64(r.Packets) || sumMetric(m, "xlb_rule_packets_total") != tx {
		t.Errorf("backend packets %v, rule packets %v, verdict tx %v, status %d: want all equal", be, sumMetric(m, "xlb_rule_packets_total"), tx, r.Packets)
	}
	if rx := sumMetric(m, "xlb_rx_packets_total"); rx != sumMetric(m, "xlb_verdict_packets_total") || rx != float64(st.Counters.RX) {
		t.Errorf("rx %v, verdicts %v, status rx %d: each packet counts once", rx, sumMetric(m, "xlb_verdict_packets_total"), st.Counters.RX)
	}
	for reason, n := range map[string]uint64{"ipv4-bad-checksum": 7, "bad-tcp-flags": 5} {
		if got := sumMetric(m, "xlb_drop_packets_total", `reason="`+reason+`"`); got != float64(st.Counters.Drops[reason]) || got < float64(n) {
			t.Errorf("xlb_drop_packets_total{reason=%q} = %v, status %d, injected %d", reason, got, st.Counters.Drops[reason], n)
		}
	}
	if got := sumMetric(m, "xlb_drop_packets_total") + sumMetric(m, "xlb_pass_packets_total"); got != sumMetric(m, "xlb_verdict_packets_total", `verdict="drop"`)+sumMetric(m, "xlb_verdict_packets_total", `verdict="pass"`) {
		t.Errorf("drop and pass reasons sum to %v, the drop and pass verdicts to %v", got, sumMetric(m, "xlb_verdict_packets_total", `verdict="drop"`)+sumMetric(m, "xlb_verdict_packets_total", `verdict="pass"`))
	}
	if got := sumMetric(m, "xlb_backend_connections_total"); got != float64(r.NewConnections) {
		t.Errorf("xlb_backend_connections_total %v, status %d", got, r.NewConnections)
	}
	if got := sumMetric(m, "xlb_backend_connections_active"); got < float64(len(keep)) {
		t.Errorf("xlb_backend_connections_active %v with %d connections open", got, len(keep))
	}
	var qrx, qdrops uint64
	for _, q := range st.QueueStats {
		qrx += q.RXPackets
		qdrops += q.Drops
	}
	var drops uint64
	for _, n := range st.Counters.Drops {
		drops += n
	}
	if qrx != st.Counters.RX || qdrops != drops {
		t.Errorf("queues: rx %d drops %d; appliance rx %d drops %d", qrx, qdrops, st.Counters.RX, drops)
	}
	if st.Version == "" || st.UptimeSeconds <= 0 {
		t.Errorf("version %q, uptime %v", st.Version, st.UptimeSeconds)
	}

	// The clients close: every connection becomes inactive.
	for _, k := range keep {
		k.c.Close()
	}
	testutil.WaitFor(t, 20*time.Second, "active connections fall to 0", func() (bool, string) {
		r := rule(statusJSON(t, sock))
		return r.ActiveConnections == 0 && r.InactiveConnections > 0, fmt.Sprintf("active %d, inactive %d", r.ActiveConnections, r.InactiveConnections)
	})
	m = metricValues(scrapeBody(t, l))
	if got := sumMetric(m, "xlb_backend_connections_active"); got != 0 {
		t.Errorf("xlb_backend_connections_active %v after the clients closed", got)
	}

	t.Run("lint", func(t *testing.T) {
		problems, err := promlint.New(strings.NewReader(scrapeBody(t, l))).Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
		if _, err := exec.LookPath("promtool"); err != nil {
			t.Skip("skipped promtool: not installed (the linter above runs the same checks)")
		}
		cmd := exec.Command("promtool", "check", "metrics")
		cmd.Stdin = strings.NewReader(scrapeBody(t, l))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	})
}

// TestEndToEndTop runs xlb top under tmux as a user who may only read the
// control socket (a member of control_socket_group): it shows the lab's
// rule and backends, its counters move with the traffic, a key sorts, and
// q quits.
func TestEndToEndTop(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("skipped: tmux is not installed (.ci/run installs it)")
	}
	l := labWith(t, lab.Options{Backends: 2})
	rules := l.DefaultRules("IPIP")[:1]
	rules[0].Health = healthNone
	// The daemon's files in a directory every user may enter, and its
	// socket open to a group of its own.
	const group = 64998
	dir, err := os.MkdirTemp("", "xlb-top-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	cfg, err := l.WriteConfig(dir, rules)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A top-level key goes before the first table.
	main := strings.Replace(string(data), "\n[", fmt.Sprintf("\ncontrol_socket_group = \"%d\"\n[", group), 1)
	if err := os.WriteFile(cfg, []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	x := xlbRun(t, l, dir, cfg)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "xlb.test")
	if data, err = os.ReadFile(self); err == nil {
		err = os.WriteFile(bin, data, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	backgroundTraffic(t, l)

	top := fmt.Sprintf("%s top --socket %s --interval 500ms", bin, x.Socket())
	if _, err := exec.LookPath("setpriv"); err == nil {
		top = fmt.Sprintf("setpriv --reuid=65534 --regid=65534 --groups=%d %s", group, top)
	} else {
		t.Log("setpriv is missing: xlb top runs as root, not over the read-only level")
	}
	server := "xlbtop" + strings.TrimPrefix(filepath.Base(dir), "xlb-top-") // tmux -L: a server of our own
	tmux := func(args ...string) (string, error) {
		out, err := exec.Command("tmux", append([]string{"-L", server}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := tmux("new-session", "-d", "-s", "top", "-x", "180", "-y", "40", "env", runMainEnv+"=1", "sh", "-c", top); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { tmux("kill-server") })
	screen := func() string {
		out, err := tmux("capture-pane", "-p", "-t", "top")
		if err != nil {
			t.Fatalf("tmux capture-pane: %v\n%s", err, out)
		}
		return out
	}
	// packets is the PACKETS column of the rule's row.
	packets := func(s string) int64 {
		for _, line := range strings.Split(s, "\n") {
			if f := strings.Fields(line); len(f) > 3 && f[0] == "web4" {
				n, _ := strconv.ParseInt(f[len(f)-2], 10, 64)
				return n
			}
		}
		return -1
	}
	var first string
	testutil.WaitFor(t, 30*time.Second, "xlb top shows the rule and its backends", func() (bool, string) {
		first = screen()
		ok := strings.Contains(first, "web4 TCP "+l.Opts.VIP4.String()) && strings.Contains(first, "RULE / BACKEND") && packets(first) > 0
		for _, b := range l.Backends {
			ok = ok && strings.Contains(first, b.Tunnel4.String())
		}
		return ok, first
	})
	testutil.WaitFor(t, 30*time.Second, "its counters move", func() (bool, string) {
		s := screen()
		return packets(s) > packets(first), fmt.Sprintf("packets %d → %d", packets(first), packets(s))
	})
	if strings.HasPrefix(top, "setpriv") {
		// It really is the unprivileged user's process that reads.
		if uids := processUIDs(bin); len(uids) != 1 || uids[0] != "65534" {
			t.Errorf("xlb top runs as uid %v, want 65534 (read-only)", uids)
		}
	}
	if out, err := tmux("send-keys", "-t", "top", "n"); err != nil {
		t.Fatalf("send-keys: %v %s", err, out)
	}
	testutil.WaitFor(t, 10*time.Second, "n sorts by name", func() (bool, string) {
		s := screen()
		return strings.Contains(s, "n name ↑"), s
	})
	if out, err := tmux("send-keys", "-t", "top", "q"); err != nil {
		t.Fatalf("send-keys: %v %s", err, out)
	}
	testutil.WaitFor(t, 10*time.Second, "q quits", func() (bool, string) {
		_, err := tmux("has-session", "-t", "top")
		return err != nil, "session still there"
	})
}

// processUIDs returns the real user ids of the processes running exe.
func processUIDs(exe string) []string {
	var out []string
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range pids {
		if link, err := os.Readlink(filepath.Join(p, "exe")); err != nil || link != exe {
			continue
		}
		status, err := os.ReadFile(filepath.Join(p, "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				out = append(out, f[1])
			}
		}
	}
	return out
}
