package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"time"
)

// Addresses of the benchmark topology (documentation and benchmark ranges
// only).
const (
	genAddr = "198.18.0.1"
	appAddr = "198.18.0.2"
	vipAddr = "203.0.113.10"
	vipPort = 80
	nSinks  = 2
)

func sinkAddr(i int) string { return fmt.Sprintf("198.18.0.%d", 100+i) }

// topo is the benchmark's namespaces:
//
//	gen (pktgen) ─┐
//	app (eth0) ───┼── sw: br0 ── sink0, sink1 (XDP: count and drop port 80)
//
// app is one-armed, as xlb is: packets come in and leave on eth0.
type topo struct {
	prefix  string
	queues  int
	appMAC  net.HardwareAddr
	sinkMAC []net.HardwareAddr
}

func (t *topo) ns(name string) string { return t.prefix + name }

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func ipBatch(ns string, cmds ...string) error {
	args := []string{"ip"}
	if ns != "" {
		args = append(args, "-n", ns)
	}
	cmd := exec.Command(args[0], append(args[1:], "-batch", "-")...)
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s -batch: %w: %s", ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func sysctl(ns string, kv ...string) error {
	return run(append([]string{"ip", "netns", "exec", ns, "sysctl", "-qw"}, kv...)...)
}

func linkMAC(ns, dev string) (net.HardwareAddr, error) {
	out, err := exec.Command("ip", "-n", ns, "-j", "link", "show", dev).Output()
	if err != nil {
		return nil, fmt.Errorf("link %s in %s: %w", dev, ns, err)
	}
	var l []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal(out, &l); err != nil || len(l) != 1 {
		return nil, fmt.Errorf("link %s in %s: %v", dev, ns, err)
	}
	return net.ParseMAC(l[0].Address)
}

// newTopo builds the namespaces with queues RX/TX queues on the
// appliance's veth (both ends).
func newTopo(prefix string, queues int) (_ *topo, err error) {
	t := &topo{prefix: prefix, queues: queues}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	names := []string{"sw", "gen", "app"}
	for i := range nSinks {
		names = append(names, fmt.Sprintf("sink%d", i))
	}
	for _, n := range names {
		if err := run("ip", "netns", "add", t.ns(n)); err != nil {
			return nil, err
		}
		// No IPv6: no router solicitations or ND in the counters.
		if err := sysctl(t.ns(n), "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"); err != nil {
			return nil, err
		}
	}
	q := fmt.Sprint(queues)
	sw := []string{"link add br0 type bridge", "link set br0 up",
		// The generator's veth has 2 queues: its thread uses queue = CPU 1.
		fmt.Sprintf("link add g0 numtxqueues 2 numrxqueues 2 type veth peer name eth0 netns %s numtxqueues 2 numrxqueues 2", t.ns("gen")),
		fmt.Sprintf("link add a0 numtxqueues %s numrxqueues %s type veth peer name eth0 netns %s numtxqueues %s numrxqueues %s", q, q, t.ns("app"), q, q),
	}
	ports := []string{"g0", "a0"}
	for i := range nSinks {
		p := fmt.Sprintf("s%d", i)
		sw = append(sw, fmt.Sprintf("link add %s type veth peer name eth0 netns %s", p, t.ns(fmt.Sprintf("sink%d", i))))
		ports = append(ports, p)
	}
	for _, p := range ports {
		sw = append(sw, "link set "+p+" master br0", "link set "+p+" up")
	}
	if err := ipBatch(t.ns("sw"), sw...); err != nil {
		return nil, err
	}
	// With br_netfilter loaded (by anything on the host), bridged frames
	// would walk iptables in the switch: not part of any forwarder.
	_ = sysctl(t.ns("sw"), "net.bridge.bridge-nf-call-iptables=0", "net.bridge.bridge-nf-call-ip6tables=0", "net.bridge.bridge-nf-call-arptables=0")
	if err := ipBatch(t.ns("gen"), "addr add "+genAddr+"/24 dev eth0", "link set eth0 up", "link set lo up"); err != nil {
		return nil, err
	}
	if err := ipBatch(t.ns("app"), "addr add "+appAddr+"/24 dev eth0", "link set eth0 up", "link set lo up",
		"route add default via "+genAddr); err != nil {
		return nil, err
	}
	// The kernel peer forwards out of the interface it received on: no
	// redirects, no reverse-path filter.
	if err := sysctl(t.ns("app"), "net.ipv4.ip_forward=1", "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.eth0.send_redirects=0",
		"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0", "net.netfilter.nf_conntrack_max=1048576"); err != nil {
		// nf_conntrack_max exists only once conntrack is loaded; retry without it.
		if err := sysctl(t.ns("app"), "net.ipv4.ip_forward=1", "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.eth0.send_redirects=0",
			"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0"); err != nil {
			return nil, err
		}
	}
	for i := range nSinks {
		ns := t.ns(fmt.Sprintf("sink%d", i))
		if err := ipBatch(ns, "addr add "+sinkAddr(i)+"/24 dev eth0", "link set eth0 up", "link set lo up"); err != nil {
			return nil, err
		}
		mac, err := linkMAC(ns, "eth0")
		if err != nil {
			return nil, err
		}
		t.sinkMAC = append(t.sinkMAC, mac)
	}
	if t.appMAC, err = linkMAC(t.ns("app"), "eth0"); err != nil {
		return nil, err
	}
	// Resolve every neighbour and teach the bridge every MAC before any
	// measurement.
	time.Sleep(200 * time.Millisecond)
	for i := range nSinks {
		if err := run("ip", "netns", "exec", t.ns("app"), "ping", "-c1", "-W1", sinkAddr(i)); err != nil {
			return nil, err
		}
	}
	if err := run("ip", "netns", "exec", t.ns("gen"), "ping", "-c1", "-W1", appAddr); err != nil {
		return nil, err
	}
	return t, nil
}

// Close deletes every namespace (the veths and bridge go with them).
func (t *topo) Close() {
	names := []string{"gen", "app", "sw"}
	for i := range nSinks {
		names = append(names, fmt.Sprintf("sink%d", i))
	}
	for _, n := range names {
		exec.Command("ip", "netns", "del", t.ns(n)).Run()
	}
}
