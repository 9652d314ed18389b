package main

// Flow-state sharing in a fleet ([fleet], pkg/fleet): three appliances
// behind BIRD with ECMP, connections that must survive the fleet changing
// after the backend set changed. One lab serves every step in turn.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
	xfleet "github.com/xlbnet/xlb/pkg/fleet"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// shareFleet is a fleet lab whose appliances start when a step says so.
type shareFleet struct {
	*fleet
	rules []lab.Rule
	dirs  []string
}

// startShareFleet builds a lab of n appliances with [fleet] and starts xlb
// on the first `running` of them, every rule on backends.
func startShareFleet(t *testing.T, n, running int, backends []int) *shareFleet {
	t.Helper()
	l := labWith(t, lab.Options{Appliances: n, Backends: 5, ClientAddrs: 250, Fleet: true})
	f := &shareFleet{fleet: &fleet{t: t, l: l, xs: make([]*labXLB, n)}}
	for range n {
		f.dirs = append(f.dirs, t.TempDir())
	}
	f.rules = f.rulesOn(backends)
	t.Cleanup(func() {
		for i, x := range f.xs {
			if x != nil {
				if err := x.Stop(); err != nil {
					t.Errorf("stop xlb %d: %v", i, err)
				}
			}
		}
	})
	for i := range running {
		f.start(i)
	}
	return f
}

func (f *shareFleet) rulesOn(backends []int) []lab.Rule {
	rules := f.l.DefaultRules("IPIP")
	for i := range rules {
		rules[i].Backends = backends
	}
	return rules
}

// start runs xlb on appliance i with the current rules.
func (f *shareFleet) start(i int) {
	f.t.Helper()
	a := f.l.Appliances[i]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x, err := startLabXLBOn(ctx, f.l, a, f.dirs[i], f.rules, func(s string) { f.t.Log(a.NS.Name + ": " + s) })
	if err != nil {
		f.t.Fatal(err)
	}
	f.xs[i] = x
}

// running returns the indexes of the appliances that run.
func (f *shareFleet) running() []int {
	var out []int
	for i, x := range f.xs {
		if x != nil {
			out = append(out, i)
		}
	}
	return out
}

// setBackends reloads every running appliance with the rules on backends
// and waits until each publishes them (web4's eligible set).
func (f *shareFleet) setBackends(backends []int) {
	f.t.Helper()
	f.rules = f.rulesOn(backends)
	for _, i := range f.running() {
		if _, err := f.l.WriteConfigOn(f.l.Appliances[i], f.dirs[i], f.rules); err != nil {
			f.t.Fatal(err)
		}
		if err := f.xs[i].Reload(); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, i := range f.running() {
		testutil.WaitFor(f.t, 20*time.Second, fmt.Sprintf("appliance %d serves %d backends", i, len(backends)), func() (bool, string) {
			st := f.status(i)
			for _, r := range st.Rules {
				if r.Name == "web4" {
					return r.Eligible == len(backends), fmt.Sprintf("web4 eligible %d", r.Eligible)
				}
			}
			return false, "no rule web4"
		})
	}
}

// waitShared waits until every running appliance holds (at least) as many
// exceptions from each other running appliance as that one owns, with
// nothing left to send, and reports how many each owns.
func (f *shareFleet) waitShared(what string) []int {
	f.t.Helper()
	owned := make([]int, len(f.xs))
	testutil.WaitFor(f.t, 30*time.Second, what+": every exception at every peer", func() (bool, string) {
		sts := map[int]*control.Fleet{}
		for _, i := range f.running() {
			st := f.status(i).Appliance.Fleet
			if st == nil {
				return false, fmt.Sprintf("appliance %d shows no fleet", i)
			}
			sts[i] = st
			owned[i] = st.Owned
		}
		for i, st := range sts {
			if st.Queued != 0 {
				return false, fmt.Sprintf("appliance %d has %d records queued", i, st.Queued)
			}
			for _, p := range st.Peers {
				j := f.applianceOf(p.Address)
				if sts[j] == nil {
					continue
				}
				// ≥: a restarted peer's earlier exceptions stay held until
				// they expire (their flows may have moved to a third).
				if p.Held < sts[j].Owned || p.Owned != uint32(sts[j].Owned) {
					return false, fmt.Sprintf("appliance %d holds %d of appliance %d's %d exceptions", i, p.Held, j, sts[j].Owned)
				}
			}
		}
		return true, ""
	})
	f.t.Logf("%s: exceptions owned per appliance %v", what, owned)
	return owned
}

func (f *shareFleet) applianceOf(addr string) int {
	for i, a := range f.l.Appliances {
		if a.Addr4.String() == addr {
			return i
		}
	}
	f.t.Fatalf("no appliance %s", addr)
	return -1
}

func (f *shareFleet) hops() []netip.Addr { return f.addrs(false, f.running()...) }

// TestFleetShare drives the acceptance points of flow-state sharing on one
// lab of three appliances, 200 long-lived connections per step, each of
// which must keep its backend: a third appliance joins after a set change;
// a backend is added, then an appliance is SIGKILLed, then restarts and
// takes its share back; a backend fails while connections persist on it,
// then an appliance is drained; hostile datagrams are dropped and counted.
func TestFleetShare(t *testing.T) {
	f := startShareFleet(t, 3, 2, []int{0, 1, 2})
	l := f.l
	vip := l.Opts.VIP4
	f.waitRoute("two appliances announce", time.Minute, vip, f.hops()...)

	t.Run("third appliance joins after a set change", func(t *testing.T) {
		ll := startLongLived(t, f.fleet, 200, 200*time.Millisecond)
		f.setBackends([]int{0, 1, 2, 3})
		owned := f.waitShared("backend 3 added on both")
		if owned[0]+owned[1] < 20 {
			t.Errorf("only %v exceptions after a fourth backend was added under 200 connections", owned)
		}
		f.start(2)
		f.waitRoute("three appliances announce", time.Minute, vip, f.hops()...)
		if log := f.xs[2].log.String(); !strings.Contains(log, "fleet joined") || strings.Index(log, "fleet joined") > strings.Index(log, "bgp announce") {
			t.Errorf("the third appliance did not join before it announced:\n%s", log)
		}
		time.Sleep(2 * time.Second)
		ll.finish(t, "a third appliance joins (ECMP rehash among three)")
		f.logPeerHits(t)
	})

	t.Run("backend added, then SIGKILL and restart", func(t *testing.T) {
		ll := startLongLived(t, f.fleet, 200, 200*time.Millisecond)
		f.setBackends([]int{0, 1, 2, 3, 4})
		f.waitShared("backend 4 added on all three")
		time.Sleep(time.Second)
		if err := f.xs[1].Kill(); err != nil {
			t.Fatal(err)
		}
		killed := f.xs[1]
		f.xs[1] = nil
		f.waitRoute("killed appliance's next hop gone", 10*time.Second, vip, f.hops()...)
		time.Sleep(3 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		x, err := killed.Restart(ctx, func(s string) { t.Log("xlb1 (restarted): " + s) })
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		f.xs[1] = x
		f.waitRoute("restarted appliance announces", time.Minute, vip, f.hops()...)
		time.Sleep(3 * time.Second)
		ll.finish(t, "a backend added, an appliance SIGKILLed and restarted")
		st := f.status(1).Appliance.Fleet
		if st == nil || !st.Joined || st.JoinTimedOut || st.Held == 0 {
			t.Errorf("the restarted appliance's fleet: %+v", st)
		}
		if log := x.log.String(); strings.Index(log, "fleet joined") < 0 || strings.Index(log, "fleet joined") > strings.Index(log, "bgp announce") {
			t.Errorf("the restarted appliance did not join before it announced")
		}
		f.logPeerHits(t)
	})

	t.Run("unhealthy backend with persisting connections, then drain", func(t *testing.T) {
		ll := startLongLived(t, f.fleet, 200, 200*time.Millisecond)
		sick := l.Backends[2]
		sick.SetHealthy(false)
		defer sick.SetHealthy(true)
		for _, i := range f.running() {
			testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("appliance %d takes backend 2 out", i), func() (bool, string) {
				for _, r := range f.status(i).Rules {
					if r.Name == "web4" {
						return r.Eligible == 4, fmt.Sprintf("eligible %d", r.Eligible)
					}
				}
				return false, ""
			})
		}
		f.waitShared("backend 2 unhealthy, its TCP connections persisting")
		if _, errOut, err := runXLB(t, "appliance", "drain", "--socket", f.xs[0].Socket()); err != nil {
			t.Fatalf("drain: %v %s", err, errOut)
		}
		f.waitRoute("drained appliance withdrawn", 10*time.Second, vip, f.addrs(false, 1, 2)...)
		time.Sleep(3 * time.Second)
		ll.finish(t, "a backend unhealthy (DEFAULT_FOR_PROTOCOL: TCP persists), then an appliance drained")
		f.checkLookup(t, ll) // while backend 2 is still unhealthy: the exceptions live
		f.logPeerHits(t)
		if _, errOut, err := runXLB(t, "appliance", "undrain", "--socket", f.xs[0].Socket()); err != nil {
			t.Fatalf("undrain: %v %s", err, errOut)
		}
		f.waitRoute("undrained appliance announces again", 30*time.Second, vip, f.hops()...)
		log := f.xs[0].log.String()
		asked := strings.LastIndex(log, "fleet join: asking every peer")
		joined := strings.LastIndex(log, "fleet joined")
		announced := strings.LastIndex(log, "bgp announce")
		if asked < 0 || joined < asked || announced < joined {
			t.Errorf("undrain did not join again before announcing (asked at %d, joined at %d, announced at %d of the log)", asked, joined, announced)
		}
	})

	t.Run("status and metrics", func(t *testing.T) {
		out, _, err := runXLB(t, "status", "--socket", f.xs[2].Socket())
		if err != nil || !strings.Contains(out, "fleet: "+l.Appliances[2].Addr4.String()+":9642 joined") || !strings.Contains(out, "peer "+l.Appliances[0].Addr4.String()+" synced") {
			t.Errorf("xlb status: %v\n%s", err, out)
		}
		m := scrapeOn(t, l, 2)
		for _, want := range []string{"xlb_fleet_joined 1", fmt.Sprintf(`xlb_fleet_peer_synced{peer="%s"} 1`, l.Appliances[0].Addr4), "xlb_fleet_exceptions_owned ", `xlb_fleet_records_total{direction="received"`} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
	})

	t.Run("hostile datagrams", func(t *testing.T) {
		// From the router (it reaches the appliances' fabric addresses):
		// one sealed with another key, one cut short, one with the lab key
		// claiming to be appliance 1 from an epoch it never proved.
		to := netip.AddrPortFrom(l.Appliances[2].Addr4, 9642)
		from := l.Appliances[1].Addr4
		other, _ := xfleet.NewKeyring([]byte("not-the-lab-key-but-long-enough-000000"))
		labKey, _ := xfleet.NewKeyring([]byte(lab.FleetKey))
		send := func(d []byte) {
			err := l.Router.Do(func() error {
				c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.Write(d)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		before := f.status(2).Appliance.Fleet
		send(xfleet.TestDatagram(other, xfleet.TypeRecords, from, to.Addr(), 77, 1))
		send(xfleet.TestDatagram(labKey, xfleet.TypeRecords, from, to.Addr(), 77, 2)[:60])
		send(xfleet.TestDatagram(labKey, xfleet.TypeRecords, from, to.Addr(), 77, 3))
		want := map[string]uint64{"auth": 1, "truncated": 1, "unverified": 1}
		testutil.WaitFor(t, 10*time.Second, "hostile datagrams counted", func() (bool, string) {
			st := f.status(2).Appliance.Fleet
			var got map[string]uint64
			for i, p := range st.Peers {
				if p.Address == from.String() {
					got = map[string]uint64{}
					for r, n := range p.Drops {
						got[r] = n - before.Peers[i].Drops[r]
					}
				}
			}
			for r, n := range want {
				if got[r] != n {
					return false, fmt.Sprintf("drops %v", got)
				}
			}
			return true, ""
		})
		if st := f.status(2).Appliance.Fleet; st.Peers[0].State != "synced" || st.Peers[1].State != "synced" {
			t.Errorf("hostile datagrams disturbed the peers: %+v", st.Peers)
		}
	})

	t.Run("xlb restart hands the peer table over", func(t *testing.T) {
		before := f.status(2).Appliance.Fleet
		res, err := restartXLB(t, f.xs[2], "restart")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("restart: successor pid %d, pause %.2f ms, notes %q", res.PID, res.PauseMS, res.Notes)
		st := f.status(2).Appliance.Fleet // the successor answers on the same socket
		if st == nil || !st.Joined || st.JoinTimedOut || st.Stored == 0 || st.Capacity != before.Capacity {
			t.Fatalf("the successor's fleet right after the hand-over: %+v", st)
		}
		testutil.WaitFor(t, 20*time.Second, "the successor's peers synced", func() (bool, string) {
			st := f.status(2).Appliance.Fleet
			for _, p := range st.Peers {
				if p.State != "synced" || p.Held < int(p.Owned) {
					return false, fmt.Sprintf("peer %s %s, holding %d of %d", p.Address, p.State, p.Held, p.Owned)
				}
			}
			return true, ""
		})
		most := 0
		for _, p := range f.status(2).Appliance.Fleet.Peers {
			most = max(most, int(p.Owned))
		}
		// The table it took over held a peer's exceptions before any peer
		// sent anything (the count is read when the node starts).
		if st.Stored < most {
			t.Errorf("the successor took over %d entries; a peer owns %d", st.Stored, most)
		}
		t.Logf("the successor took over a peer table of %d entries and started joined (the peers own up to %d)", st.Stored, most)
		f.waitRoute("the route kept all three", 10*time.Second, vip, f.hops()...)
	})
}

// checkLookup asks every appliance about ll's connections (still open,
// their entries live): `xlb lookup` says of some that a peer's copy held
// here decides them, of others that a queue's entry made from a peer's
// does (the flow moved here).
func (f *shareFleet) checkLookup(t *testing.T, ll *longLived) {
	held, made := 0, 0
	var heldAt, heldFrom, heldSrc string
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, i := range f.running() {
		c := control.NewClient(f.xs[i].Socket())
		for _, fc := range ll.conns {
			src := fc.k.conn.LocalAddr().(*net.TCPAddr).AddrPort()
			q := control.LookupQuery{Rule: "web4", Src: netip.AddrPortFrom(src.Addr().Unmap(), src.Port()).String()}
			res, err := c.Lookup(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case res.EntryPeer != "":
				held++
				heldAt, heldFrom, heldSrc = f.xs[i].Socket(), res.EntryPeer, q.Src
				if res.Backend != f.tunnel4(fc.backend) || !strings.Contains(res.Why, "fleet peer "+res.EntryPeer) {
					t.Errorf("appliance %d, flow %s: held copy says %s (%s), the connection is on %s", i, q.Src, res.Backend, res.Why, fc.backend)
				}
			case res.EntryFromPeer:
				made++
			}
		}
		c.Close()
	}
	t.Logf("lookups of %d connections on %d appliances: %d held copies of a peer's exception, %d entries made from one", len(ll.conns), len(f.running()), held, made)
	if held == 0 || made == 0 {
		t.Errorf("lookup never said an entry came from a peer (held %d, made %d)", held, made)
	} else {
		out, _, err := runXLB(t, "lookup", "--socket", heldAt, "--rule", "web4", "--src", heldSrc)
		if err != nil || !strings.Contains(out, "from fleet peer "+heldFrom) {
			t.Errorf("xlb lookup: %v\n%s", err, out)
		}
	}

}

// tunnel4 is the address xlb names the lab backend called name by.
func (f *shareFleet) tunnel4(name string) string {
	for _, b := range f.l.Backends {
		if b.Name == name {
			return b.Tunnel4.String()
		}
	}
	return "no backend " + name
}

// logPeerHits logs how many packets each appliance placed by a peer's
// entry (flows that moved to it).
func (f *shareFleet) logPeerHits(t *testing.T) {
	var hits []uint64
	for _, i := range f.running() {
		if st := f.status(i).Appliance.Fleet; st != nil {
			hits = append(hits, st.PeerHits)
		}
	}
	t.Logf("packets placed by a peer's entry, per running appliance: %v", hits)
}

// scrapeOn scrapes appliance i's metrics (127.0.0.1:9641 in its namespace).
func scrapeOn(t *testing.T, l *lab.Lab, i int) string {
	t.Helper()
	var body string
	err := l.Appliances[i].NS.Do(func() error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:9641", 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\n\r\n")
		var sb strings.Builder
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			sb.Write(buf[:n])
			if err != nil {
				break
			}
		}
		body = sb.String()
		return nil
	})
	if err != nil {
		t.Fatalf("scrape appliance %d: %v", i, err)
	}
	return body
}
