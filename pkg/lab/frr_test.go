package lab_test

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/pkg/lab"
)

// The FRR snippet of deploy/fleet.md is FRRConfig rendered with that
// page's addresses: the router configuration the lab (and TestFleetFRR)
// runs is the one the operators read.
func TestFRRConfigIsTheDocSnippet(t *testing.T) {
	doc, err := os.ReadFile("../../deploy/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n### FRR\n")
	_, block, ok2 := strings.Cut(section, "```\n")
	snippet, _, ok3 := strings.Cut(block, "```\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal("deploy/fleet.md has no ### FRR section with a ``` block")
	}
	a := netip.MustParseAddr
	want := lab.FRRConfig(lab.FRRParams{
		RouterID: a("192.0.2.1"), LocalAS: lab.RouterAS, PeerAS: lab.ApplianceAS,
		Neighbors4: []netip.Addr{a("192.0.2.11"), a("192.0.2.12")},
		Neighbors6: []netip.Addr{a("2001:db8::11"), a("2001:db8::12")},
		VIPs4:      netip.MustParsePrefix("203.0.113.0/24"), VIPs6: netip.MustParsePrefix("2001:db8:80::/64"),
	})
	if snippet != want {
		t.Errorf("deploy/fleet.md's FRR snippet:\n%s\nis not FRRConfig with its addresses:\n%s", snippet, want)
	}
}

// TestFleetLabFRR builds a two-appliance lab whose router runs FRR: bgpd
// has a session per appliance and family with the lab's timers and
// maximum-paths, the router hashes on the 5-tuple, and Close stops zebra
// and bgpd. (The speakers' side is cmd/xlb's TestFleetFRR.)
func TestFleetLabFRR(t *testing.T) {
	l := up(t, lab.Options{Appliances: 2, Backends: 1, ClientAddrs: 2, NoDecap: true, Router: lab.RouterFRR})
	sum, err := l.Vtysh("show bgp ipv4 unicast summary", "show bgp ipv6 unicast summary")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range l.Appliances {
		for _, addr := range []netip.Addr{a.Addr4, a.Addr6} {
			if !strings.Contains(sum, addr.String()) {
				t.Errorf("bgpd has no neighbour %s:\n%s", addr, sum)
			}
		}
	}
	run, err := l.Vtysh("show running-config")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"neighbor XLB timers 1 3", "maximum-paths 16", "permit 203.0.113.0/24 ge 32", "permit fd00:203:113::/64 ge 128"} {
		if !strings.Contains(run, want) {
			t.Errorf("bgpd runs without %q:\n%s", want, run)
		}
	}
	if out, err := l.Router.Output("cat", filepath.Join("/proc/sys/net/ipv4/fib_multipath_hash_policy")); err != nil || strings.TrimSpace(out) != "3" {
		t.Errorf("router multipath hash policy %q (%v), want 3", out, err)
	}
	if hops, err := l.RouteNexthops(l.Opts.VIP4); err != nil || len(hops) != 0 {
		t.Errorf("route to the VIP before any announcement: %v %v", hops, err)
	}
	var out bytes.Buffer
	if err := l.Describe(&out); err != nil || !strings.Contains(out.String(), "FRR (zebra, bgpd)") {
		t.Errorf("Describe: %v\n%s", err, out.String())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Vtysh("show version"); err == nil {
		t.Error("frr still answers after Close")
	}
}
