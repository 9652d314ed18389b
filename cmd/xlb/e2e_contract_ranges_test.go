package main

// Who may reach a VIP, on real packets: source ranges (sources outside get
// nothing and are counted, inside work, a reload applies to the next
// packet) and packets to a VIP that no rule claims (dropped and counted, or
// passed to the appliance's own stack with unmatched_vip_traffic = "pass").

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
)

// sourceRangesTOML is a source_ranges line admitting exactly the given
// hosts, among 3000 prefixes of documentation space no lab client uses
// (the workers' cost must not depend on the list's length).
func sourceRangesTOML(hosts []netip.Addr) string {
	var ps []string
	for _, a := range hosts {
		ps = append(ps, fmt.Sprintf("%q", netip.PrefixFrom(a, a.BitLen())))
	}
	for i := range 1500 {
		ps = append(ps, fmt.Sprintf(`"203.0.%d.%d/32"`, 113+i/256%2, i%256), fmt.Sprintf(`"2001:db8:%x::/48"`, i))
	}
	return "source_ranges = [" + strings.Join(ps, ", ") + "]\n"
}

// refused reports whether a TCP connection from src to vip's HTTP port
// gets no answer within the timeout.
func refusedTCP(l *lab.Lab, src, vip netip.Addr) bool {
	err := l.Client.Do(func() error {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 1500 * time.Millisecond}
		c, err := d.Dial("tcp", netip.AddrPortFrom(vip, l.Opts.HTTPPort).String())
		if err == nil {
			c.Close()
		}
		return err
	})
	return err != nil
}

// Source ranges on the wire (docs/design.md#source-ranges, a rule's part of
// docs/design.md#rules-and-vips): with 3000 prefixes per rule, TCP and UDP
// from admitted clients of both families reach a backend, and their echo
// requests are answered; other clients get nothing, and their packets are
// counted as source-range in status and metrics and shown by `xlb capture
// --reason source-range`. A reload that changes the ranges keeps the open
// connections of clients it still admits on their backends, cuts those of
// clients it no longer admits, and admits the new ones.
func TestWireSourceRanges(t *testing.T) {
	wireTest(t)
	l := labWith(t, lab.Options{Backends: 2, ClientAddrs: 20})
	in4, out4 := l.ClientAddrs4[:4], l.ClientAddrs4[10:14]
	in6, out6 := l.ClientAddrs6[:4], l.ClientAddrs6[10:14]
	ranges := sourceRangesTOML(append(append([]netip.Addr{}, in4...), in6...))
	rules := []lab.Rule{rule(l, "web4", ranges), rule(l, "web6", ranges), rule(l, "udp4", ranges), rule(l, "udp6", ranges)}
	x := xlbIn(t, l, rules)
	for _, r := range []string{"web4", "web6", "udp4", "udp6"} {
		waitHealth(t, l, x, r, "HEALTHY", 0, 1)
	}

	var kept []*keepConn // admitted before and after the reload
	where := map[*keepConn]int{}
	var cut *keepConn // admitted before the reload only
	for _, fam := range []struct {
		n       int
		in, out []netip.Addr
	}{{4, in4, out4}, {6, in6, out6}} {
		vip := vipOf(l, fam.n)
		for i, src := range fam.in {
			k, err := dialVIP(l, src, vip)
			if err != nil {
				t.Fatalf("TCP from admitted %s: %v", src, err)
			}
			t.Cleanup(func() { k.c.Close() })
			if where[k] = k.on(); where[k] < 0 {
				t.Fatalf("TCP from admitted %s: no answer", src)
			}
			if fam.n == 4 && i == 1 {
				cut = k
			} else {
				kept = append(kept, k)
			}
			if b := openUDPFlow(t, l, src, netip.AddrPortFrom(vip, l.Opts.UDPPort)).who(16); b < 0 {
				t.Errorf("UDP from admitted %s: no answer", src)
			}
		}
		var wg sync.WaitGroup
		for _, src := range fam.out {
			wg.Add(2)
			go func() {
				defer wg.Done()
				if !refusedTCP(l, src, vip) {
					t.Errorf("TCP from %s, outside the ranges, was answered", src)
				}
			}()
			go func() {
				defer wg.Done()
				if b := openUDPFlow(t, l, src, netip.AddrPortFrom(vip, l.Opts.UDPPort)).who(16); b >= 0 {
					t.Errorf("UDP from %s, outside the ranges, reached be%d", src, b)
				}
			}()
		}
		wg.Wait()
	}
	// Echo requests: answered for an admitted source only (every rule of
	// the VIPs has the ranges).
	for _, fam := range []struct{ in, out netip.Addr }{{in4[0], out4[1]}, {in6[0], out6[1]}} {
		vip := l.Opts.VIP4
		if fam.in.Is6() {
			vip = l.Opts.VIP6
		}
		if err := lab.PingFrom(l.Client, fam.in, vip, 1, 3*time.Second); err != nil {
			t.Errorf("ping %s from admitted %s: %v", vip, fam.in, err)
		}
		if err := lab.PingFrom(l.Client, fam.out, vip, 1, 1500*time.Millisecond); err == nil {
			t.Errorf("ping %s from %s, outside the ranges, was answered", vip, fam.out)
		}
	}
	// Each refused client sent SYN retries and three datagrams.
	st := x.status(t)
	if n := st.Counters.Drops["source-range"]; n < 8*4 {
		t.Errorf("source-range drops %d after 16 refused clients; drops %v", n, st.Counters.Drops)
	}
	if m := metricValues(scrapeBody(t, l)); sumMetric(m, "xlb_drop_packets_total", `reason="source-range"`) < 8*4 {
		t.Errorf("xlb_drop_packets_total{reason=\"source-range\"} = %v", sumMetric(m, "xlb_drop_packets_total", `reason="source-range"`))
	}

	// xlb capture --reason source-range shows the refused packets.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				refusedTCP(l, out4[0], l.Opts.VIP4)
			}
		}
	}()
	var capOut, capErr bytes.Buffer
	err := newApp(&capOut, &capErr).Run([]string{"xlb", "capture", "--socket", x.Socket(), "--reason", "source-range", "--rule", "web4", "--point", "rx", "--count", "3", "--duration", "60s", "-w", "-"})
	close(stop)
	<-done
	if err != nil {
		t.Fatalf("xlb capture: %v\n%s", err, capErr.String())
	}
	pkts, ifaces := readPcapNG(t, capOut.Bytes())
	if len(pkts) != 3 {
		t.Fatalf("capture: %d packets, want 3", len(pkts))
	}
	for i, p := range pkts {
		if ifaces[i] != "rx:drop:source-range" || !strings.Contains(p.String(), out4[0].String()) {
			t.Errorf("captured packet %d on %q: %v", i, ifaces[i], p)
		}
	}

	// The reload: in4[1] leaves the ranges, out4[0] joins them.
	admitted := append([]netip.Addr{in4[0], in4[2], in4[3], out4[0]}, in6...)
	ranges = sourceRangesTOML(admitted)
	rules = []lab.Rule{rule(l, "web4", ranges), rule(l, "web6", ranges), rule(l, "udp4", ranges), rule(l, "udp6", ranges)}
	reloadWith(t, l, x, rules)
	for _, k := range kept {
		if got := k.on(); got != where[k] {
			t.Errorf("open connection from an admitted client: be%d before the reload, %d after", where[k], got)
		}
	}
	if got := cut.on(); got >= 0 {
		t.Errorf("the open connection of a client the reload no longer admits still reaches be%d", got)
	}
	if refusedTCP(l, out4[0], l.Opts.VIP4) {
		t.Errorf("TCP from %s, admitted by the reload, gets no answer", out4[0])
	}
	if b := openUDPFlow(t, l, out4[0], netip.AddrPortFrom(l.Opts.VIP4, l.Opts.UDPPort)).who(16); b < 0 {
		t.Errorf("UDP from %s, admitted by the reload, gets no answer", out4[0])
	}
}

// Packets to a VIP on a port no rule claims (docs/design.md#rules-and-vips):
// with the default unmatched_vip_traffic = "drop" they reach neither the
// appliance's own service on that port nor anything else and are counted
// as no-rule, while the rule's port and echo requests still work; after a
// reload to "pass" the appliance's own service on the VIP address answers.
func TestWireUnmatchedVIPTraffic(t *testing.T) {
	wireTest(t)
	l := labWith(t, lab.Options{Backends: 1, ClientAddrs: 8})
	const hosted = 8081
	// The appliance hosts a service of its own on the VIP addresses.
	for _, vip := range []netip.Addr{l.Opts.VIP4, l.Opts.VIP6} {
		args := []string{"-n", l.XLB.Name, "addr", "add", netip.PrefixFrom(vip, vip.BitLen()).String(), "dev", "lo"}
		if vip.Is6() {
			// Else the address is tentative until the kernel's DAD work
			// runs, and the listen below fails (1 in 10 at once beside a
			// busy CPU).
			args = append(args, "nodad")
		}
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip addr add %s in %s: %v: %s", vip, l.XLB.Name, err, out)
		}
		serveIn(t, l.XLB, netip.AddrPortFrom(vip, hosted), func(c net.Conn) {
			fmt.Fprintln(c, "appliance")
			c.Close()
		})
	}
	dir := t.TempDir()
	cfg, err := l.WriteConfig(dir, []lab.Rule{rule(l, "web4", ""), rule(l, "web6", "")})
	if err != nil {
		t.Fatal(err)
	}
	x := xlbRun(t, l, dir, cfg)
	waitHealth(t, l, x, "web4", "HEALTHY", 0)
	waitHealth(t, l, x, "web6", "HEALTHY", 0)

	// hostedAnswer connects from src to vip:hosted and returns the line it
	// got ("" when nothing answered).
	hostedAnswer := func(src, vip netip.Addr) string {
		var line string
		l.Client.Do(func() error {
			d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 1500 * time.Millisecond}
			c, err := d.Dial("tcp", netip.AddrPortFrom(vip, hosted).String())
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(2 * time.Second))
			_, err = fmt.Fscan(c, &line)
			return err
		})
		return line
	}
	before := x.status(t).Counters.Drops["no-rule"]
	for i, vip := range []netip.Addr{l.Opts.VIP4, l.Opts.VIP6} {
		src := clientsOf(l, 4+2*i)[0]
		if got := hostedAnswer(src, vip); got != "" {
			t.Errorf("drop: port %d of %s answered %q", hosted, vip, got)
		}
		if b := openUDPFlow(t, l, src, netip.AddrPortFrom(vip, l.Opts.UDPPort)).who(16); b >= 0 {
			t.Errorf("drop: UDP to %s, which no rule claims, reached be%d", vip, b)
		}
		if err := lab.PingFrom(l.Client, src, vip, 2, 4*time.Second); err != nil {
			t.Errorf("drop: ping %s: %v; want the appliance's answer", vip, err)
		}
	}
	if res := driveFor(t, l, 20, 4, 3*time.Second); !res.OK() {
		t.Errorf("drop: the rule's own port: %s", describe(res))
	}
	// Each family: SYN retries and three datagrams.
	if n := x.status(t).Counters.Drops["no-rule"] - before; n < 2*4 {
		t.Errorf("drop: %d no-rule drops, want at least 8", n)
	}

	// Reload with unmatched_vip_traffic = "pass".
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pass := strings.Replace(string(text), "[conntrack]\n", "unmatched_vip_traffic = \"pass\"\n[conntrack]\n", 1)
	if err := os.WriteFile(filepath.Join(dir, "xlb.toml"), []byte(pass), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := x.Reload(); err != nil {
		t.Fatal(err)
	}
	waitLog(t, x, "msg=reloaded")
	before = x.status(t).Counters.Drops["no-rule"]
	for i, vip := range []netip.Addr{l.Opts.VIP4, l.Opts.VIP6} {
		src := clientsOf(l, 4+2*i)[1]
		if got := hostedAnswer(src, vip); got != "appliance" {
			t.Errorf("pass: port %d of %s answered %q; want the appliance's own service", hosted, vip, got)
		}
	}
	if res := driveFor(t, l, 20, 6, 3*time.Second); !res.OK() {
		t.Errorf("pass: the rule's own port: %s", describe(res))
	}
	if n := x.status(t).Counters.Drops["no-rule"] - before; n != 0 {
		t.Errorf("pass: %d no-rule drops", n)
	}
}
