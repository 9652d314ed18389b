package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/pktgen"
)

// macOf returns the MAC of ifname in ns.
func macOf(t *testing.T, ns *netns.NS, ifname string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err == nil {
			mac = ifi.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return mac
}

// rssKiB is a process's resident memory (VmRSS).
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no VmRSS in /proc/%d/status", pid)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// conntrackEvents sums xlb_conntrack_events_total over queues, by event.
func conntrackEvents(t *testing.T, l *lab.Lab) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	re := regexp.MustCompile(`^xlb_conntrack_events_total\{.*event="([a-z_]+)".*\} (\S+)$`)
	for _, line := range strings.Split(scrape(t, l), "\n") {
		if m := re.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			out[m[1]] += v
		}
	}
	return out
}

// TestEndToEndFlood: 20 s of SYNs from 2^16 random sources, and of ACKs
// and UDP from random tuples (a tracked UDP rule: 5-tuple affinity), each
// generator at its full rate, while 200 established connections carry a
// request every 100 ms: none breaks or moves, the daemon's resident
// memory stays within 10 %, and the counters show the new flows refused
// by the rate limit. The limit is lowered to 10 000 new entries per
// second and queue: the generators here stay below the default 125 000.
// A request may wait while the 2 cores are flooded (lost segments are
// retransmitted); a connection that breaks gets a reset or an error, and
// one that moved answers from another backend.
//
// The lab's backends decapsulate in userspace and read a fifth of the
// flood xlb forwards them, so most of a connection's segments are lost
// during the flood. TCP's exponential backoff would then wait about the
// flood's length again before its next try (answers took up to 38.8 s of
// the 40 s allowed), so the lab caps the retransmission timeout at 4 s:
// a connection answers within 4 s of the flood's end, and a timeout is a
// path that stayed dead. (At a 1 s cap the kernel gave up on connections
// that had lost 15 tries in a row, 16 s into the flood.)
func TestEndToEndFlood(t *testing.T) {
	opts := lab.Options{Backends: 3, XLBPinDir: bpffsDir(t)}
	if _, err := os.Stat("/proc/sys/net/ipv4/tcp_rto_max_ms"); err == nil {
		opts.TCPRTOMax = 4 * time.Second
	}
	l := labWith(t, opts)
	web := l.DefaultRules("IPIP")[0]
	web.Health = healthNone
	udp := lab.Rule{Name: "udp5", VIP: l.Opts.VIP4, Protocol: "UDP", Ports: `"ALL"`, Encap: "IPIP", Health: healthNone,
		Extra: "session_affinity = \"CLIENT_IP_PORT_PROTO\"\n"}
	rules := []lab.Rule{web, udp}
	dir := t.TempDir()
	cfg, err := l.WriteConfig(dir, rules)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(text), "[conntrack]\n", "[conntrack]\nnew_entries_per_second = 10000\n", 1)), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	x, err := runLabXLB(ctx, l.XLB.Name, dir, cfg, nil)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stopDaemon(t, l, x) }()

	ws := openWatched(t, l, l.ClientAddrs4[:200], 40*time.Second) // a flooded request may wait for retransmissions
	stopWatch := watchAll(ws)
	defer stopWatch()
	time.Sleep(2 * time.Second) // the daemon warm, the watchers going
	pid := x.cmd.Process.Pid
	rssBefore := rssKiB(t, pid)
	before := conntrackEvents(t, l)

	vip := netip.PrefixFrom(l.Opts.VIP4, 32)
	sources := lab.ClientExtraNet4 // 2^16 addresses the router routes back to the client
	a0 := l.Appliances[0]
	gens := []struct {
		name string
		ns   *netns.NS
		cfg  pktgen.Config
	}{
		// SYNs through the router, from 2^16 random sources.
		{"SYN", l.Client, pktgen.Config{Ifname: "eth0", Packet: pktgen.Packet{
			SrcMAC: macOf(t, l.Client, "eth0"), DstMAC: macOf(t, l.Router, "cl0"),
			Src: pktgen.AddrRange{First: sources.Addr(), Last: lastAddr(sources)}, Dst: pktgen.AddrRange{First: vip.Addr(), Last: vip.Addr()},
			SrcPorts: pktgen.PortRange{Min: 1024, Max: 65535}, DstPorts: pktgen.PortRange{Min: l.Opts.HTTPPort, Max: l.Opts.HTTPPort},
			Proto: pktgen.TCPSYN, Seed: 1}}},
		// ACKs and UDP from random tuples, straight onto the appliance's
		// link from the router's side (one TX queue each).
		{"ACK", l.Router, pktgen.Config{Ifname: a0.RouterLink, FirstThread: 0, Packet: pktgen.Packet{
			SrcMAC: l.GatewayMAC, DstMAC: a0.MAC,
			Src: pktgen.AddrRange{First: sources.Addr(), Last: lastAddr(sources)}, Dst: pktgen.AddrRange{First: vip.Addr(), Last: vip.Addr()},
			SrcPorts: pktgen.PortRange{Min: 1, Max: 65535}, DstPorts: pktgen.PortRange{Min: l.Opts.HTTPPort, Max: l.Opts.HTTPPort},
			Proto: pktgen.TCPACK, Seed: 2}}},
		{"UDP", l.Router, pktgen.Config{Ifname: a0.RouterLink, FirstThread: 1, Packet: pktgen.Packet{
			SrcMAC: l.GatewayMAC, DstMAC: a0.MAC,
			Src: pktgen.AddrRange{First: sources.Addr(), Last: lastAddr(sources)}, Dst: pktgen.AddrRange{First: vip.Addr(), Last: vip.Addr()},
			SrcPorts: pktgen.PortRange{Min: 1, Max: 65535}, DstPorts: pktgen.PortRange{Min: 1, Max: 65535},
			Proto: pktgen.UDP, Seed: 3}}},
	}
	type result struct {
		name string
		rep  pktgen.Report
		err  error
	}
	results := make(chan result, len(gens))
	for _, g := range gens {
		cfg := g.cfg
		cfg.Netns, cfg.Threads, cfg.Duration = g.ns.Name, 1, 20*time.Second
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rep, err := pktgen.Run(ctx, cfg)
			results <- result{g.name, rep, err}
		}()
	}
	var sent uint64
	for range gens {
		r := <-results
		if r.err != nil {
			t.Fatalf("%s flood: %v", r.name, r.err)
		}
		for _, th := range r.rep.Results {
			t.Logf("%s flood: %d packets, %d pps", r.name, th.Packets, th.PPS())
			sent += th.Packets
		}
	}
	time.Sleep(2 * time.Second) // connections that lost packets retransmit
	stopWatch()
	broken, moved, asks, detail := tally(ws)
	t.Logf("after the flood: %d of %d connections broken, %d moved (%d requests)%s", broken, len(ws), moved, asks, detail)
	if broken+moved > 0 {
		t.Errorf("the flood broke %d and moved %d established connections", broken, moved)
	}
	rssAfter := rssKiB(t, pid)
	t.Logf("daemon resident memory: %d KiB before, %d KiB after %d flood packets", rssBefore, rssAfter, sent)
	if d := float64(rssAfter-rssBefore) / float64(rssBefore); d > 0.10 || d < -0.10 {
		t.Errorf("resident memory changed by %.1f %%, want within 10 %%", 100*d)
	}
	after := conntrackEvents(t, l)
	var b strings.Builder
	for _, e := range []string{"miss_syn", "miss_non_syn", "miss_other", "insert", "insert_skipped", "insert_failure", "evicted_unconfirmed", "evicted_lru", "confirmed"} {
		fmt.Fprintf(&b, " %s +%.0f", e, after[e]-before[e])
	}
	t.Logf("conntrack events during the flood:%s", b.String())
	if after["insert_skipped"] <= before["insert_skipped"] {
		t.Errorf("no insert skipped by the new-entry rate during the flood")
	}
	if after["evicted_lru"] != before["evicted_lru"] {
		t.Errorf("an established entry was evicted")
	}
	if sent < 100000 {
		t.Errorf("the generators sent only %d packets: no flood", sent)
	}
}

// lastAddr is the last address of an IPv4 prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n |= 1<<(32-p.Bits()) - 1
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}
