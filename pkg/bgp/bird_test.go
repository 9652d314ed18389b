package bgp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/lab/labtest"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// helperSpeaker is a Speaker running in another process (an appliance's
// namespace), driven over its stdin.
type helperSpeaker struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *strings.Builder
}

// startHelper starts a helper speaker in namespace ns; env adds
// variables (helperCarriedEnv: a hand-over's successor).
func startHelper(t *testing.T, ns string, o Options, env ...string) *helperSpeaker {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(o)
	cmd := exec.Command("ip", "netns", "exec", ns, self, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+string(b)), env...)
	h := &helperSpeaker{t: t, cmd: cmd, stderr: &strings.Builder{}}
	cmd.Stderr = h.stderr
	if h.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.out = bufio.NewScanner(stdout)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	if r := h.read(); r != "ok" {
		t.Fatalf("helper speaker in %s: %s\n%s", ns, r, h.stderr)
	}
	return h
}

func (h *helperSpeaker) read() string {
	if !h.out.Scan() {
		return "error: helper exited"
	}
	return h.out.Text()
}

func (h *helperSpeaker) do(cmd string) string {
	h.t.Helper()
	fmt.Fprintln(h.in, cmd)
	r := h.read()
	if strings.HasPrefix(r, "error") {
		h.t.Fatalf("%s: %s\n%s", cmd, r, h.stderr)
	}
	return r
}

func (h *helperSpeaker) peers() []PeerStatus {
	var ps []PeerStatus
	if err := json.Unmarshal([]byte(h.do("peers")), &ps); err != nil {
		h.t.Fatal(err)
	}
	return ps
}

// TestBIRD drives the speaker against the fleet lab's router: BIRD 2 with
// merge paths. Two appliances announce both VIPs over IPv4 and IPv6
// sessions; the router's kernel route gets both next hops; BIRD sees the
// attributes; a withdraw removes one next hop within a second; Close
// (NOTIFICATION) removes the other; Detach with graceful restart leaves the
// route for a successor.
func TestBIRD(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := labtest.Up(t, "b", lab.Options{Appliances: 2, Backends: 1, ClientAddrs: 2, NoDecap: true})
	vip4, vip6 := HostPrefix(l.Opts.VIP4), HostPrefix(l.Opts.VIP6)
	opts := func(a *lab.Appliance, gr time.Duration) Options {
		return Options{LocalAS: lab.ApplianceAS, RouterID: a.Addr4, HoldTime: 3 * time.Second, GracefulRestart: gr,
			Peers: []Peer{{Address: l.Gateway4, AS: lab.RouterAS}, {Address: l.Gateway6, AS: lab.RouterAS}},
			Attrs: Attributes{MED: 5, Communities: []uint32{lab.RouterAS<<16 | 80}}}
	}
	a0, a1 := l.Appliances[0], l.Appliances[1]
	s0 := startHelper(t, a0.NS.Name, opts(a0, 20*time.Second))
	s1 := startHelper(t, a1.NS.Name, opts(a1, 0))
	for _, s := range []*helperSpeaker{s0, s1} {
		s.do("announce " + vip4.String())
		s.do("announce " + vip6.String())
	}
	wait := func(what string, vip netip.Addr, want ...netip.Addr) time.Duration {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		d, err := l.WaitNexthops(wctx, vip, want)
		if err != nil {
			t.Fatalf("%s: %v\nbirdc:\n%s\nbird log:\n%s", what, err, must(l.Birdc("show protocols")), l.BIRDLog())
		}
		t.Logf("%s: %v", what, d.Round(time.Millisecond))
		return d
	}
	wait("IPv4 route with both appliances", l.Opts.VIP4, a0.Addr4, a1.Addr4)
	wait("IPv6 route with both appliances", l.Opts.VIP6, a0.Addr6, a1.Addr6)

	all, _ := l.Birdc("show route all", vip4.String())
	for _, want := range []string{"BGP.med: 5", "BGP.community: (65000,80)", "BGP.as_path: 65001", "BGP.next_hop: " + a0.Addr4.String(), "BGP.next_hop: " + a1.Addr4.String()} {
		if !strings.Contains(all, want) {
			t.Errorf("birdc show route all %s lacks %q:\n%s", vip4, want, all)
		}
	}
	for _, p := range s1.peers() {
		if !p.Established() || len(p.Announced) != 1 {
			t.Errorf("appliance 1 peer %+v", p)
		}
	}

	s1.do("withdraw " + vip4.String())
	if d := wait("IPv4 next hop of appliance 1 withdrawn", l.Opts.VIP4, a0.Addr4); d > time.Second {
		t.Errorf("withdraw took %v at the router, want < 1s", d)
	}
	wait("IPv6 route untouched", l.Opts.VIP6, a0.Addr6, a1.Addr6)
	s1.do("announce " + vip4.String())
	wait("IPv4 next hop of appliance 1 back", l.Opts.VIP4, a0.Addr4, a1.Addr4)

	// Close: a NOTIFICATION, BIRD drops the routes at once.
	s1.do("close")
	if d := wait("appliance 1 closed", l.Opts.VIP4, a0.Addr4); d > time.Second {
		t.Errorf("close took %v at the router, want < 1s", d)
	}
	wait("appliance 1 closed (IPv6)", l.Opts.VIP6, a0.Addr6)

	// Detach with graceful restart: BIRD keeps appliance 0's routes
	// (stale) until a successor announces them again.
	s0.do("detach")
	time.Sleep(1500 * time.Millisecond)
	if got, _ := l.RouteNexthops(l.Opts.VIP4); len(got) != 1 || got[0] != a0.Addr4 {
		t.Fatalf("after detach the router's next hops are %v, want %v kept\n%s", got, a0.Addr4, l.BIRDLog())
	}
	s0b := startHelper(t, a0.NS.Name, opts(a0, 20*time.Second))
	s0b.do("announce " + vip4.String())
	time.Sleep(500 * time.Millisecond)
	wait("successor holds the route", l.Opts.VIP4, a0.Addr4)
	// The route turns fresh when BIRD has read the successor's UPDATE,
	// which follows the session's establishment: wait for both.
	waitUntil(t, 20*time.Second, "successor's session established and the route fresh", func() bool {
		ps := s0b.peers()
		sh, _ := l.Birdc("show route", vip4.String())
		return len(ps) == 2 && ps[0].Established() && strings.Contains(sh, a0.Addr4.String()) && !strings.Contains(sh, "stale")
	})
	s0b.do("close")
	wait("no appliance left", l.Opts.VIP4)
}

func must(s string, _ error) string { return s }
