package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/lab/labtest"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestBIRDBFD runs GoBGP's BFD against BIRD's (the lab router with
// Options.BFD: 100 ms × 3): the sessions come Up on both sides; a
// SIGSTOPped speaker leaves the router's route within a second (the
// router's BFD, not the 3 s hold time); after SIGCONT it comes back; BFD
// packets from the router dropped at the appliance make our side's BFD
// go Down and reset our BGP session (the Down reaches BGP on our side).
func TestBIRDBFD(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := labtest.Up(t, "bf", lab.Options{Appliances: 2, Backends: 1, ClientAddrs: 2, NoDecap: true, BFD: true})
	bfd := BFD{MinTx: 100 * time.Millisecond, MinRx: 100 * time.Millisecond, Multiplier: 3}
	opts := func(a *lab.Appliance) Options {
		return Options{LocalAS: lab.ApplianceAS, RouterID: a.Addr4, HoldTime: 3 * time.Second,
			Peers: []Peer{{Address: l.Gateway4, AS: lab.RouterAS, BFD: bfd}, {Address: l.Gateway6, AS: lab.RouterAS, BFD: bfd}}}
	}
	a0, a1 := l.Appliances[0], l.Appliances[1]
	s0 := startHelper(t, a0.NS.Name, opts(a0))
	s1 := startHelper(t, a1.NS.Name, opts(a1))
	vip4 := HostPrefix(l.Opts.VIP4)
	for _, s := range []*helperSpeaker{s0, s1} {
		s.do("announce " + vip4.String())
	}
	wait := func(what string, within time.Duration, want ...netip.Addr) time.Duration {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		d, err := l.WaitNexthops(wctx, l.Opts.VIP4, want)
		if err != nil {
			t.Fatalf("%s: %v\n%s\nspeaker 0:\n%s\nspeaker 1:\n%s\nbird log:\n%s", what, err, must(l.Birdc("show bfd sessions")), s0.stderr, s1.stderr, logTail(l.BIRDLog(), 80))
		}
		t.Logf("%s: %v", what, d.Round(time.Millisecond))
		return d
	}
	bfdUp := func(s *helperSpeaker) bool {
		ps := s.peers()
		return len(ps) == 2 && ps[0].BFD == "up" && ps[1].BFD == "up" && ps[0].Established()
	}
	wait("route with both appliances", 30*time.Second, a0.Addr4, a1.Addr4)
	waitUntil(t, 20*time.Second, "BFD up on both speakers", func() bool { return bfdUp(s0) && bfdUp(s1) })
	sessions, err := l.Birdc("show bfd sessions")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []netip.Addr{a0.Addr4, a0.Addr6, a1.Addr4, a1.Addr6} {
		if !sessionUp(sessions, a) {
			t.Errorf("BIRD's BFD session to %s is not Up:\n%s", a, sessions)
		}
	}

	// SIGSTOP: only BFD can drop the next hop within a second (hold 3 s).
	stopAt := time.Now()
	if err := s1.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	wait("next hop of the stopped speaker gone", 10*time.Second, a0.Addr4)
	if d := time.Since(stopAt); d >= time.Second {
		t.Errorf("next hop gone %v after SIGSTOP, want < 1 s with BFD 100 ms × 3", d)
	} else {
		t.Logf("SIGSTOP → next hop gone: %v", d.Round(time.Millisecond))
	}
	if err := s1.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	back := wait("continued speaker back", time.Minute, a0.Addr4, a1.Addr4)
	if back > 10*time.Second {
		t.Logf("slow return; speaker log:\n%s\nbird log:\n%s", s1.stderr, logTail(l.BIRDLog(), 60))
	}
	waitUntil(t, 20*time.Second, "BFD up again after SIGCONT", func() bool { return bfdUp(s1) })

	// Our side's detection: drop the router's BFD packets at appliance 0.
	// Its BFD times out (1 s: the lab router's multiplier 10 × 100 ms),
	// resets the BGP session, and the router drops the next hop (its BFD
	// sees our Down).
	nft := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", append([]string{"netns", "exec", a0.NS.Name, "nft"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("nft %v: %v: %s", args, err, out)
		}
	}
	nft("add table inet xlbbfdtest")
	defer exec.Command("ip", "netns", "exec", a0.NS.Name, "nft", "delete table inet xlbbfdtest").Run()
	nft("add chain inet xlbbfdtest in { type filter hook input priority 0; }")
	nft("add rule inet xlbbfdtest in udp dport 3784 drop")
	wait("next hop of the deaf speaker gone", 10*time.Second, a1.Addr4)
	deadline := time.Now().Add(10 * time.Second)
	for ps := s0.peers(); !(len(ps) == 2 && ps[0].BFD != "up" && !ps[0].Established()); ps = s0.peers() {
		if time.Now().After(deadline) {
			t.Fatalf("our BFD not down with the BGP session reset within 10 s: %+v\n%s", ps, s0.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("appliance 0 after dropping BFD: %+v", s0.peers()[0])
	nft("delete table inet xlbbfdtest")
	wait("deaf speaker back", time.Minute, a0.Addr4, a1.Addr4)
}

// sessionUp finds addr's line in `birdc show bfd sessions` and says
// whether its state is Up.
func sessionUp(out string, addr netip.Addr) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == addr.String() {
			return f[2] == "Up"
		}
	}
	return false
}

func logTail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestBIRDHandOver is a process hand-over as the daemon runs it, against
// BIRD with graceful restart and BFD: the predecessor holds its BFD
// reactions (HoldBFD); the successor resumes the BFD sessions the
// predecessor exported (StartBFD) before the predecessor Detaches, and
// starts its speaker two seconds later, as a busy machine does
// (Restarting, the VIP in Announce). The BFD sessions run at 300 ms × 3
// (BIRD's 100 ms is the smaller side): the router's detection time of
// 0.9 s (the speaker's is 3 s, the lab router's multiplier 10), still
// well under the speaker's delay, gives a machine at a load of 40 on two
// CPUs room to run both ends late. The router's route never leaves the
// appliance (polled every 5 ms), BIRD's BFD sessions never leave Up, and BIRD sees
// the successor's capability keep the forwarding state (it holds the route
// stale until the successor's End-of-RIB instead of dropping it when the
// session comes up).
func TestBIRDHandOver(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := labtest.Up(t, "bh", lab.Options{Appliances: 1, Backends: 1, ClientAddrs: 2, NoDecap: true, BFD: true})
	a0 := l.Appliances[0]
	vip4 := HostPrefix(l.Opts.VIP4)
	bfdTimers := BFD{MinTx: 300 * time.Millisecond, MinRx: 300 * time.Millisecond, Multiplier: 3}
	o := Options{LocalAS: lab.ApplianceAS, RouterID: a0.Addr4, HoldTime: 3 * time.Second, GracefulRestart: 20 * time.Second,
		Peers: []Peer{{Address: l.Gateway4, AS: lab.RouterAS, BFD: bfdTimers}, {Address: l.Gateway6, AS: lab.RouterAS, BFD: bfdTimers}}}
	s0 := startHelper(t, a0.NS.Name, o)
	s0.do("announce " + vip4.String())
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	_, err := l.WaitNexthops(wctx, l.Opts.VIP4, []netip.Addr{a0.Addr4})
	wcancel()
	if err != nil {
		t.Fatalf("route: %v\n%s", err, l.BIRDLog())
	}
	waitUntil(t, 20*time.Second, "BFD up on both sides", func() bool {
		ps := s0.peers()
		out, _ := l.Birdc("show bfd sessions")
		return len(ps) == 2 && ps[0].BFD == "up" && ps[1].BFD == "up" && sessionUp(out, a0.Addr4) && sessionUp(out, a0.Addr6)
	})

	watch := l.WatchRoute(l.Opts.VIP4, a0.Addr4, 5*time.Millisecond)
	carried := s0.do("bfdexport")
	s0.do("holdbfd on")
	o1 := o
	o1.Restarting, o1.Announce = true, []netip.Prefix{vip4}
	s1 := startHelper(t, a0.NS.Name, o1, helperCarriedEnv+"="+carried)
	detachAt := time.Now()
	s0.do("detach")
	time.Sleep(2 * time.Second) // the successor's speaker starts late
	s1.do("start")
	waitUntil(t, 30*time.Second, "the successor's IPv4 session established and the route fresh", func() bool {
		ps := s1.peers()
		out, _ := l.Birdc("show route", vip4.String())
		return len(ps) == 2 && ps[0].Established() && strings.Contains(out, a0.Addr4.String()) && !strings.Contains(out, "stale")
	})
	t.Logf("successor's session established and the route fresh %v after the detach", time.Since(detachAt).Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond)
	n, firstLost, _ := watch.Stop()
	birdLog := l.BIRDLog()
	if n > 0 {
		t.Errorf("the router's route lost the appliance in %d polls (first at %v; detach at %s)\nsuccessor:\n%s\nbird log:\n%s",
			n, firstLost, detachAt.Format("15:04:05.000"), s1.stderr, logTail(birdLog, 80))
	}
	if strings.Contains(birdLog, "changed state from Up") {
		t.Errorf("BIRD's BFD sessions left Up during the hand-over:\n%s", logTail(birdLog, 80))
	}
	caps, _ := l.Birdc("show protocols all", fmt.Sprintf("a%dv4", a0.Index))
	t.Logf("BIRD's view of the successor's session:\n%s", caps)
	if !strings.Contains(caps, "AF preserved") {
		t.Errorf("BIRD does not see the successor keep the forwarding state (no \"AF preserved\" in its graceful-restart capability):\n%s", caps)
	}
	s1.do("close")
}
