package main

// The fleet (docs/design.md#the-fleet): two xlb appliances announce the VIPs
// over BGP to a BIRD router that spreads connections over them with ECMP. One
// lab serves every acceptance point in turn, so BIRD and the namespaces are
// built once.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// fleet is a two-appliance lab with xlb running on both.
type fleet struct {
	t  *testing.T
	l  *lab.Lab
	xs []*labXLB
}

func startFleet(t *testing.T) *fleet {
	t.Helper()
	return startFleetWith(t, lab.Options{Appliances: 2, Backends: 3, ClientAddrs: 250})
}

// startFleetWith builds the lab of o and runs xlb on each of its
// appliances.
func startFleetWith(t *testing.T, o lab.Options) *fleet {
	t.Helper()
	l := labWith(t, o)
	f := &fleet{t: t, l: l}
	rules := l.DefaultRules("IPIP")
	for _, a := range l.Appliances {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		x, err := startLabXLBOn(ctx, l, a, filepath.Join(t.TempDir(), a.NS.Name), rules, func(s string) { t.Log(a.NS.Name + ": " + s) })
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		f.xs = append(f.xs, x)
	}
	t.Cleanup(func() {
		for _, x := range f.xs {
			if err := x.Stop(); err != nil {
				t.Errorf("stop xlb: %v", err)
			}
		}
	})
	return f
}

// waitRoute waits until the router's route to vip has exactly the next
// hops want (nil: no route) and returns how long that took.
func (f *fleet) waitRoute(what string, d time.Duration, vip netip.Addr, want ...netip.Addr) time.Duration {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	took, err := f.l.WaitNexthops(ctx, vip, want)
	if err != nil {
		f.t.Fatalf("%s: %v\n%s", what, err, f.l.RouterReport())
	}
	f.t.Logf("%s: %v", what, took.Round(time.Millisecond))
	return took
}

func (f *fleet) addrs(v6 bool, idx ...int) []netip.Addr {
	var out []netip.Addr
	for _, i := range idx {
		if v6 {
			out = append(out, f.l.Appliances[i].Addr6)
		} else {
			out = append(out, f.l.Appliances[i].Addr4)
		}
	}
	return out
}

func (f *fleet) status(i int) *control.Status {
	f.t.Helper()
	c := control.NewClient(f.xs[i].Socket())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := c.Status(ctx, control.StatusQuery{})
	if err != nil {
		f.t.Fatalf("status of appliance %d: %v", i, err)
	}
	return st
}

// longLived is n keep-alive HTTP connections through the VIP, each asking
// every period; a connection that fails once is broken (and stops).
type longLived struct {
	conns []*fleetConn
	stop  chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	broken   int
	moved    int
	requests int
	firstErr error
}

type fleetConn struct {
	k         *keepAlive
	backend   string
	appliance netip.Addr // where the router's hash sends it with both next hops
}

func startLongLived(t *testing.T, f *fleet, n int, period time.Duration) *longLived {
	t.Helper()
	ll := &longLived{stop: make(chan struct{})}
	vip := netip.AddrPortFrom(f.l.Opts.VIP4, f.l.Opts.HTTPPort)
	for i := range n {
		k := openKeepAlive(t, f.l, f.l.ClientAddrs4[i%len(f.l.ClientAddrs4)])
		rep, err := k.ask()
		if err != nil {
			t.Fatalf("long-lived connection %d: %v", i, err)
		}
		local := k.conn.LocalAddr().(*net.TCPAddr).AddrPort()
		app, err := f.l.ApplianceRouteGet(netip.AddrPortFrom(local.Addr().Unmap(), local.Port()), vip)
		if err != nil {
			t.Fatal(err)
		}
		ll.conns = append(ll.conns, &fleetConn{k: k, backend: rep.Backend, appliance: app})
	}
	for _, c := range ll.conns {
		ll.wg.Add(1)
		go func() {
			defer ll.wg.Done()
			tick := time.NewTicker(period)
			defer tick.Stop()
			for {
				select {
				case <-ll.stop:
					return
				case <-tick.C:
				}
				rep, err := c.k.ask()
				ll.mu.Lock()
				ll.requests++
				switch {
				case err != nil:
					ll.broken++
					if ll.firstErr == nil {
						ll.firstErr = fmt.Errorf("connection from %s (via %s, backend %s): %w", c.k.src, c.appliance, c.backend, err)
					}
				case rep.Backend != c.backend:
					ll.moved++
				}
				ll.mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	return ll
}

// on counts the connections the router sends to appliance a.
func (ll *longLived) on(a netip.Addr) int {
	n := 0
	for _, c := range ll.conns {
		if c.appliance == a {
			n++
		}
	}
	return n
}

// finish stops the connections and fails the test if any broke or moved.
func (ll *longLived) finish(t *testing.T, what string) {
	t.Helper()
	close(ll.stop)
	ll.wg.Wait()
	ll.mu.Lock()
	defer ll.mu.Unlock()
	t.Logf("%s: %d connections, %d requests, %d broken, %d moved to another backend", what, len(ll.conns), ll.requests, ll.broken, ll.moved)
	if ll.broken != 0 || ll.moved != 0 {
		t.Errorf("%s: %d of %d connections broken, %d requests answered by another backend (first error: %v)", what, ll.broken, len(ll.conns), ll.moved, ll.firstErr)
	}
	if ll.requests < 2*len(ll.conns) {
		t.Errorf("%s: only %d requests over %d connections", what, ll.requests, len(ll.conns))
	}
}

// spread drives 300 IPv4 connections through the router and checks that
// each of two appliances carried 30-70 % of them, then 100 over IPv6.
func (f *fleet) spread(t *testing.T) {
	l := f.l
	if err := l.CountSYNs(); err != nil {
		t.Fatal(err)
	}
	res := drive(t, l, 300, 4)
	if !res.OK() {
		t.Fatalf("%d of 300 connections failed (first: %v)", res.Errors, res.FirstError)
	}
	syns, err := l.SYNs()
	if err != nil {
		t.Fatal(err)
	}
	total := syns[0] + syns[1]
	if total < 300 {
		t.Fatalf("the router forwarded %d SYNs for 300 connections", total)
	}
	for i, n := range syns {
		if share := float64(n) / float64(total); share < 0.3 || share > 0.7 {
			t.Errorf("appliance %d carried %d of %d connections (%.0f%%), want 30-70%%", i, n, total, 100*share)
		}
	}
	t.Logf("connections per appliance %v, per backend %v", syns, res.PerBackend)
	if res := drive(t, l, 100, 6); !res.OK() {
		t.Errorf("IPv6: %d of 100 failed (first: %v)", res.Errors, res.FirstError)
	}
}

// killAndRestart runs 200 long-lived connections, SIGKILLs appliance 1,
// checks that the router drops its next hop within 1 s, restarts it,
// waits for its announcement, and fails if any connection broke.
func (f *fleet) killAndRestart(t *testing.T) {
	l, a0, a1 := f.l, f.l.Appliances[0], f.l.Appliances[1]
	ll := startLongLived(t, f, 200, 200*time.Millisecond)
	n0, n1 := ll.on(a0.Addr4), ll.on(a1.Addr4)
	t.Logf("long-lived connections: %d via appliance 0, %d via appliance 1", n0, n1)
	if n0 < 40 || n1 < 40 {
		t.Errorf("long-lived connections not spread over both appliances: %d and %d", n0, n1)
	}
	time.Sleep(time.Second)
	// The route is watched from the signal on, while the process exits:
	// waiting for the exit first counted the exit and the test's wake-up
	// after it as the router's (1.03 s once at load 17, the route gone at
	// the first look after).
	killed := time.Now()
	if err := f.xs[1].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	exited := make(chan time.Duration, 1)
	go func(x *labXLB) {
		x.wait()
		exited <- time.Since(killed)
	}(f.xs[1])
	f.waitRoute("next hop of the killed appliance gone", 10*time.Second, l.Opts.VIP4, a0.Addr4)
	gone := time.Since(killed)
	exit := <-exited
	if gone > time.Second {
		t.Errorf("the router dropped the killed appliance's next hop %v after SIGKILL, want < 1s (the process exited after %v)", gone, exit)
	} else {
		t.Logf("next hop gone %v after SIGKILL, the process exited after %v", gone.Round(time.Millisecond), exit.Round(time.Millisecond))
	}
	time.Sleep(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	x, err := f.xs[1].Restart(ctx, func(s string) { t.Log("xlb1 (restarted): " + s) })
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	f.xs[1] = x
	f.waitRoute("restarted appliance announces again", time.Minute, l.Opts.VIP4, f.addrs(false, 0, 1)...)
	time.Sleep(2 * time.Second)
	ll.finish(t, "SIGKILL of appliance 1 and its restart")
	if !strings.Contains(x.log.String(), "bgp announce") || !strings.Contains(x.log.String(), "rule warm") {
		t.Errorf("the restarted appliance logged no warm rule or announcement:\n%s", x.log)
	}
}

// stopAndContinue SIGSTOPs appliance 1: the router must drop its next hop
// within hold time + 1 s; after SIGCONT it must come back.
func (f *fleet) stopAndContinue(t *testing.T) {
	// Hold time 3 s: BIRD (jittered hold timer) notices a silent peer
	// within 1.25-3 s, FRR within 2-3 s.
	f.stopWithin(t, 4*time.Second, "hold time + 1 s")
}

// stopWithin SIGSTOPs appliance 1, fails unless the router drops its next
// hop within limit (why says where limit comes from), SIGCONTs it and
// waits until it is back. It returns both times.
func (f *fleet) stopWithin(t *testing.T, limit time.Duration, why string) (gone, back time.Duration) {
	l, a0 := f.l, f.l.Appliances[0]
	sigstop := time.Now()
	if err := f.xs[1].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			f.xs[1].Signal(syscall.SIGCONT)
		}
	}()
	f.waitRoute("next hop of the stopped appliance gone", 15*time.Second, l.Opts.VIP4, a0.Addr4)
	if gone = time.Since(sigstop); gone > limit {
		t.Errorf("next hop gone %v after SIGSTOP, want within %s", gone, why)
	}
	sigcont := time.Now()
	if err := f.xs[1].Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	// GoBGP idles 5 s after a dropped session, BIRD waits 1-5 s, FRR its
	// start timer and connect retry.
	f.waitRoute("continued appliance back", time.Minute, l.Opts.VIP4, f.addrs(false, 0, 1)...)
	return gone, time.Since(sigcont)
}

// drainUndrain drains appliance 1 under 200 long-lived connections: both
// VIPs withdrawn within 1 s of the command's answer, new connections all
// on appliance 0, none broken; undrain announces again.
func (f *fleet) drainUndrain(t *testing.T) {
	l, a0 := f.l, f.l.Appliances[0]
	f.waitRoute("both next hops", time.Minute, l.Opts.VIP6, f.addrs(true, 0, 1)...)
	ll := startLongLived(t, f, 200, 200*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	out, errOut, err := runXLB(t, "appliance", "drain", "--socket", f.xs[1].Socket())
	if err != nil {
		t.Fatalf("drain: %v %s", err, errOut)
	}
	// The drain is in force when the command answers: the daemon saves it
	// to the state file first (an fsync, which a busy disk can make take
	// seconds), then withdraws. The withdraw's way to the router is what
	// is timed, from the answer, as deploy/fleet.md measures it.
	answered := time.Now()
	t.Logf("xlb appliance drain answered after %v:\n%s", answered.Sub(start).Round(time.Millisecond), out)
	f.waitRoute("drained appliance withdrawn (IPv4)", 10*time.Second, l.Opts.VIP4, a0.Addr4)
	f.waitRoute("drained appliance withdrawn (IPv6)", 10*time.Second, l.Opts.VIP6, a0.Addr6)
	if d := time.Since(answered); d > time.Second {
		t.Errorf("withdrawn %v after the drain command answered, want < 1s", d)
	}
	if err := l.CountSYNs(); err != nil {
		t.Fatal(err)
	}
	if res := drive(t, l, 100, 4); !res.OK() {
		t.Errorf("new connections while drained: %d of 100 failed (first: %v)", res.Errors, res.FirstError)
	}
	if syns, _ := l.SYNs(); syns[1] != 0 || syns[0] < 100 {
		t.Errorf("new connections while appliance 1 is drained went %v", syns)
	}
	time.Sleep(time.Second)
	ll.finish(t, "appliance drain")
	st := f.status(1)
	if !st.Appliance.Drained || st.Appliance.BGP == nil || len(st.Appliance.BGP.VIPs) != 2 || st.Appliance.BGP.VIPs[0].Announced {
		t.Errorf("status of the drained appliance: %+v", st.Appliance)
	}
	state, _ := os.ReadFile(filepath.Join(f.xs[1].dir, "state.toml"))
	if !strings.Contains(string(state), "[appliance]") {
		t.Errorf("drain not in the state file:\n%s", state)
	}
	if _, errOut, err := runXLB(t, "appliance", "undrain", "--socket", f.xs[1].Socket()); err != nil {
		t.Fatalf("undrain: %v %s", err, errOut)
	}
	f.waitRoute("undrained appliance announces again", 10*time.Second, l.Opts.VIP4, f.addrs(false, 0, 1)...)
	f.waitRoute("undrained appliance announces again (IPv6)", 10*time.Second, l.Opts.VIP6, f.addrs(true, 0, 1)...)
}

// TestFleet drives every acceptance point of the fleet issue on one lab:
// two appliances behind BIRD (merge paths on, 5-tuple hash).
func TestFleet(t *testing.T) {
	f := startFleet(t)
	l := f.l
	a0, a1 := l.Appliances[0], l.Appliances[1]
	f.waitRoute("IPv4 VIP announced by both appliances", time.Minute, l.Opts.VIP4, f.addrs(false, 0, 1)...)
	f.waitRoute("IPv6 VIP announced by both appliances (MP-BGP)", time.Minute, l.Opts.VIP6, f.addrs(true, 0, 1)...)

	t.Run("spread", f.spread)

	t.Run("identical tables", func(t *testing.T) {
		s0, s1 := f.status(0), f.status(1)
		if len(s0.Rules) != 4 || len(s1.Rules) != 4 {
			t.Fatalf("rules: %d and %d", len(s0.Rules), len(s1.Rules))
		}
		for i := range s0.Rules {
			r0, r1 := s0.Rules[i], s1.Rules[i]
			if r0.TableDigest == "" || r0.TableDigest != r1.TableDigest || !r0.FirstChecksDone || !r1.FirstChecksDone {
				t.Errorf("rule %s: digests %q and %q, first checks done %v and %v", r0.Name, r0.TableDigest, r1.TableDigest, r0.FirstChecksDone, r1.FirstChecksDone)
			}
		}
		for _, r := range s0.Rules {
			t.Logf("rule %s: table digest %s on both appliances", r.Name, r.TableDigest)
		}
		cs := []*control.Client{control.NewClient(f.xs[0].Socket()), control.NewClient(f.xs[1].Socket())}
		defer cs[0].Close()
		defer cs[1].Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		seen := map[string]int{}
		for i := range 100 {
			q := control.LookupQuery{Rule: "web4", Src: netip.AddrPortFrom(l.ClientAddrs4[i%len(l.ClientAddrs4)], uint16(50000+i)).String()}
			var backends [2]string
			for j, c := range cs {
				res, err := c.Lookup(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				backends[j] = res.Backend
			}
			if backends[0] == "" || backends[0] != backends[1] {
				t.Errorf("flow %s: appliance 0 says %q, appliance 1 says %q", q.Src, backends[0], backends[1])
			}
			seen[backends[0]]++
		}
		if len(seen) != 3 {
			t.Errorf("100 lookups reached backends %v, want all 3", seen)
		}
	})

	t.Run("visibility", func(t *testing.T) {
		st := f.status(0)
		b := st.Appliance.BGP
		if st.Appliance.Drained || b == nil || b.LocalAS != lab.ApplianceAS || b.RouterID != a0.Addr4.String() || len(b.Peers) != 2 {
			t.Fatalf("appliance status %+v", st.Appliance)
		}
		for _, p := range b.Peers {
			want := netip.PrefixFrom(l.Opts.VIP4, 32).String()
			if p.Address == l.Gateway6.String() {
				want = netip.PrefixFrom(l.Opts.VIP6, 128).String()
			}
			if p.State != "established" || p.Since == nil || len(p.Announced) != 1 || p.Announced[0] != want {
				t.Errorf("peer %+v, want established announcing %s", p, want)
			}
		}
		for _, v := range b.VIPs {
			if !v.Announced || !strings.HasPrefix(v.Reason, "serving") {
				t.Errorf("vip %+v", v)
			}
		}
		m := scrape(t, l)
		for _, want := range []string{
			fmt.Sprintf(`xlb_bgp_peer_up{peer="%s",peer_as="65000"} 1`, l.Gateway4),
			fmt.Sprintf(`xlb_bgp_peer_up{peer="%s",peer_as="65000"} 1`, l.Gateway6),
			fmt.Sprintf(`xlb_bgp_announced{vip="%s"} 1`, l.Opts.VIP4),
			fmt.Sprintf(`xlb_bgp_announced{vip="%s"} 1`, l.Opts.VIP6),
			"xlb_appliance_drained 0",
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
		if log := f.xs[0].log.String(); !strings.Contains(log, `msg="bgp announce" vip=`+l.Opts.VIP4.String()) || !strings.Contains(log, "reason=\"serving") {
			t.Errorf("no announce logged with its reason")
		}
		out, _, err := runXLB(t, "status", "--socket", f.xs[0].Socket())
		if err != nil || !strings.Contains(out, "bgp: AS 65001") || !strings.Contains(out, "table digest ") {
			t.Errorf("xlb status: %v\n%s", err, out)
		}
	})

	t.Run("SIGKILL and restart", f.killAndRestart)

	t.Run("SIGSTOP and SIGCONT", f.stopAndContinue)

	t.Run("appliance drain", f.drainUndrain)

	t.Run("VIP withdrawn without backends", func(t *testing.T) {
		for _, b := range l.Backends {
			b.SetHealthy(false)
		}
		restored := false
		defer func() {
			if !restored {
				for _, b := range l.Backends {
					b.SetHealthy(true)
				}
			}
		}()
		f.waitRoute("every appliance withdraws the VIP when its rules lose every backend", 30*time.Second, l.Opts.VIP4)
		f.waitRoute("… the IPv6 VIP too", 30*time.Second, l.Opts.VIP6)
		st := f.status(0)
		if v := st.Appliance.BGP.VIPs; len(v) != 2 || v[0].Announced || !strings.Contains(v[0].Reason, "no rule can place a new flow") {
			t.Errorf("withdrawn VIPs in status: %+v", v)
		}
		if m := scrape(t, l); !strings.Contains(m, fmt.Sprintf(`xlb_bgp_announced{vip="%s"} 0`, l.Opts.VIP4)) {
			t.Errorf("metrics do not show the VIP withdrawn")
		}
		l.Backends[1].SetHealthy(true)
		f.waitRoute("announced again when one backend recovers", 30*time.Second, l.Opts.VIP4, f.addrs(false, 0, 1)...)
		for _, b := range l.Backends {
			b.SetHealthy(true)
		}
		restored = true
		f.waitRoute("IPv6 VIP back", 30*time.Second, l.Opts.VIP6, f.addrs(true, 0, 1)...)
		if res := drive(t, l, 60, 4); !res.OK() {
			t.Errorf("after recovery: %d of 60 failed (first: %v)", res.Errors, res.FirstError)
		}
	})

	t.Run("reload", func(t *testing.T) {
		// A reload changes the attributes live: appliance 0 with a higher
		// MED loses the router's best-path comparison (same neighbour AS),
		// so its next hop leaves the ECMP route; back to MED 0, it returns.
		x := f.xs[0]
		orig, err := os.ReadFile(x.config)
		if err != nil {
			t.Fatal(err)
		}
		rewrite := func(old, new string) {
			t.Helper()
			if err := os.WriteFile(x.config, []byte(strings.Replace(string(orig), old, new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := x.Reload(); err != nil {
				t.Fatal(err)
			}
		}
		rewrite(`withdraw_delay = "1s"`, "withdraw_delay = \"1s\"\nmed = 5")
		f.waitRoute("appliance 0 with MED 5 is not merged", 10*time.Second, l.Opts.VIP4, a1.Addr4)
		rewrite("xlb.toml", "xlb.toml")
		f.waitRoute("appliance 0 with MED 0 merged again", 10*time.Second, l.Opts.VIP4, f.addrs(false, 0, 1)...)
		// The speaker's identity cannot change while running: refused, the
		// sessions stay.
		rewrite(fmt.Sprintf("local_as = %d", lab.ApplianceAS), "local_as = 65002")
		waitLog(t, x, "bgp.local_as cannot change while running (restart xlb)")
		if err := os.WriteFile(x.config, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		if hops, _ := l.RouteNexthops(l.Opts.VIP4); len(hops) != 2 {
			t.Errorf("after a refused reload the route has %v", hops)
		}
	})

	t.Run("SIGTERM withdraws first", func(t *testing.T) {
		x := f.xs[1]
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- x.Stop() }()
		f.waitRoute("stopping appliance withdrawn", 10*time.Second, l.Opts.VIP4, a0.Addr4)
		withdrawn := time.Since(start)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		exited := time.Since(start)
		t.Logf("SIGTERM: withdrawn after %v, exited after %v (withdraw_delay 1s)", withdrawn.Round(time.Millisecond), exited.Round(time.Millisecond))
		if withdrawn > time.Second || exited < time.Second {
			t.Errorf("withdrawn after %v, exited after %v: want the withdraw first, then withdraw_delay (1s), then exit", withdrawn, exited)
		}
		log := x.log.String()
		for _, want := range []string{"bgp withdraw", "reason=\"shutting down\"", "waiting withdraw_delay"} {
			if !strings.Contains(log, want) {
				t.Errorf("log lacks %q", want)
			}
		}
	})
}

// TestBadBGPConfigRejected: validate and run reject a [bgp] table with a
// bad AS, a peer that is not an address and an unknown key, each as
// file:line: key: — before anything is attached, so no root is needed.
func TestBadBGPConfigRejected(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "rules.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "rules.d", "web.toml"), []byte("name = \"web\"\nvip = \"203.0.113.10\"\nports = [\"80\"]\n[health_check]\ntype = \"TCP\"\n[[group]]\nname = \"a\"\nbackends = [\"192.0.2.1\"]\n"), 0o644)
	cfg := filepath.Join(dir, "xlb.toml")
	os.WriteFile(cfg, []byte(`interface = "eth0"
hash_seed = "0x1"
[bgp]
local_as = 0
hold = "3s"
[[bgp.peer]]
address = "router1"
peer_as = 65000
`), 0o644)
	want := []string{
		"xlb.toml:4: bgp.local_as: 0 is outside [1, 4294967294]",
		"xlb.toml:5: bgp.hold: unknown key",
		`xlb.toml:7: bgp.peer[0].address: "router1" is not an IPv4 or IPv6 address`,
	}
	for _, cmd := range []string{"validate", "run"} {
		_, errOut, err := runXLB(t, cmd, "-c", cfg)
		if err == nil || exitCode(err) != 1 {
			t.Fatalf("%s accepted the configuration: %v", cmd, err)
		}
		text := errOut + err.Error()
		if strings.Contains(text, "warning") {
			t.Errorf("%s: a warning beside the errors:\n%s", cmd, text)
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: output lacks %q:\n%s", cmd, w, text)
			}
		}
	}
}

// TestLabDemoFleet runs `xlb lab demo --appliances 2`: it prints the
// connections per appliance (both carried some) and per backend, and
// leaves nothing behind.
func TestLabDemoFleet(t *testing.T) {
	testutil.RequireRoot(t)
	prefix := testutil.Unique("dm") + "-"
	out, errOut, err := runXLB(t, "lab", "demo", "--appliances", "2", "--prefix", prefix, "--requests", "400", "--backends", "2", "--clients", "100")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	if left := lab.Namespaces(prefix); len(left) != 0 {
		lab.Down(prefix)
		t.Errorf("demo left %v", left)
	}
	shares := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && (f[0] == prefix+"xlb" || f[0] == prefix+"xlb1") && strings.HasSuffix(f[3], "%") && f[2] != "0" {
			shares[f[0]] = true
		}
	}
	if len(shares) != 2 || !strings.Contains(out, "appliance") || !strings.Contains(out, "backend") || !strings.Contains(out, "400 requests") {
		t.Errorf("demo output lacks the shares per appliance and backend:\n%s", out)
	}
	t.Logf("xlb lab demo --appliances 2:\n%s", out)
}
