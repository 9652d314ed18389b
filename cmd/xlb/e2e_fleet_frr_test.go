package main

// The fleet behind FRR instead of BIRD: the router runs zebra and bgpd with
// the configuration deploy/fleet.md shows (lab.FRRConfig), and TestFleet's
// steps that depend on the router run against it.

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestFleetFRR: two appliances behind FRR. Each VIP is one multipath
// kernel route with both appliances as next hops (maximum-paths), new
// connections spread over both, a SIGKILLed appliance's next hop goes
// within 1 s with no long-lived connection broken (and it comes back on
// restart), a SIGSTOPped one goes within hold time + 1 s, and `xlb
// appliance drain` withdraws. Without frr installed it fails, saying
// what to install (CI installs it).
func TestFleetFRR(t *testing.T) {
	f := startFleetWith(t, lab.Options{Appliances: 2, Backends: 3, ClientAddrs: 250, Router: lab.RouterFRR})
	l := f.l
	f.waitRoute("IPv4 VIP announced by both appliances", time.Minute, l.Opts.VIP4, f.addrs(false, 0, 1)...)
	f.waitRoute("IPv6 VIP announced by both appliances (MP-BGP)", time.Minute, l.Opts.VIP6, f.addrs(true, 0, 1)...)

	t.Run("one multipath route", func(t *testing.T) {
		for _, v6 := range []bool{false, true} {
			vip, bits := l.Opts.VIP4, 32
			if v6 {
				vip, bits = l.Opts.VIP6, 128
			}
			f.oneMultipathRoute(t, netip.PrefixFrom(vip, bits), f.addrs(v6, 0, 1))
		}
	})
	t.Run("spread", f.spread)
	t.Run("SIGKILL and restart", f.killAndRestart)
	t.Run("SIGSTOP and SIGCONT", f.stopAndContinue)
	t.Run("appliance drain", f.drainUndrain)
}

// oneMultipathRoute checks that the router has exactly one kernel route to
// p, installed by FRR, with one next hop per address of hops.
func (f *fleet) oneMultipathRoute(t *testing.T, p netip.Prefix, hops []netip.Addr) {
	t.Helper()
	args := []string{"route", "show", "exact", p.String()}
	if p.Addr().Is6() {
		args = append([]string{"-6"}, args...)
	}
	out, err := f.l.Router.Output("ip", args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("router: ip %s\n%s", strings.Join(args, " "), out)
	routes, nexthops := 0, map[string]bool{}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line != "" && line[0] != ' ' && line[0] != '\t' {
			routes++
			if !strings.Contains(line, "proto bgp") {
				t.Errorf("route not installed by FRR's bgpd: %q", line)
			}
		}
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "nexthop" && f[1] == "via" {
			nexthops[f[2]] = true
		}
	}
	if routes != 1 || len(nexthops) != len(hops) {
		t.Errorf("%s: %d routes with next hops %v, want one route with %v", p, routes, nexthops, hops)
	}
	for _, h := range hops {
		if !nexthops[h.String()] {
			t.Errorf("%s: no next hop via %s", p, h)
		}
	}
}

// TestLabDemoFleetFRR runs `xlb lab demo --appliances 2 --router frr`: both
// appliances carry connections, nothing is left behind; a router other
// than bird or frr is a usage error.
func TestLabDemoFleetFRR(t *testing.T) {
	testutil.RequireRoot(t)
	if _, _, err := runXLB(t, "lab", "demo", "--prefix", "never-", "--router", "quagga"); err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "--router quagga: want bird or frr") {
		t.Errorf("--router quagga: %v (exit %d), want a usage error", err, exitCode(err))
	}
	prefix := testutil.Unique("df") + "-"
	out, errOut, err := runXLB(t, "lab", "demo", "--appliances", "2", "--router", "frr", "--prefix", prefix, "--requests", "200", "--backends", "2", "--clients", "50")
	if left := lab.Namespaces(prefix); len(left) != 0 {
		lab.Down(prefix)
		t.Errorf("demo left %v", left)
	}
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	carried := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && (f[0] == prefix+"xlb" || f[0] == prefix+"xlb1") && strings.HasSuffix(f[3], "%") && f[2] != "0" {
			carried++
		}
	}
	if carried != 2 || !strings.Contains(out, "router bgp (frr)") {
		t.Errorf("demo output lacks the FRR router or a share per appliance:\n%s", out)
	}
	t.Logf("xlb lab demo --appliances 2 --router frr:\n%s", out)
}
