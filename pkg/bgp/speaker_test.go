package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// fakeRouter is a GoBGP server on 127.0.0.2 standing in for a router in
// the unit tests (no root, loopback only). The real router, BIRD, is
// exercised by the lab tests (pkg/lab, cmd/xlb).
type fakeRouter struct {
	srv  *server.BgpServer
	port int
}

func freePort(t *testing.T, addr string) int {
	t.Helper()
	l, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Skipf("cannot listen on %s (no loopback alias?): %v", addr, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startFakeRouter(t *testing.T, gracefulHelper bool) *fakeRouter {
	t.Helper()
	port := freePort(t, "127.0.0.2")
	srv := server.NewBgpServer()
	go srv.Serve()
	ctx := context.Background()
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 65000, RouterId: "192.0.2.1", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.2"}}}); err != nil {
		t.Fatal(err)
	}
	p := &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: 65001},
		Transport: &api.Transport{PassiveMode: true, LocalAddress: "127.0.0.2"},
		Timers:    &api.Timers{Config: &api.TimersConfig{HoldTime: 3, KeepaliveInterval: 1}},
		AfiSafis:  []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, Enabled: true}}},
	}
	if gracefulHelper {
		p.GracefulRestart = &api.GracefulRestart{Enabled: true, HelperOnly: true, RestartTime: 30}
		p.AfiSafis[0].MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
	}
	if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: p}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return &fakeRouter{srv: srv, port: port}
}

// route is what the fake router received for a prefix.
type route struct {
	nexthop netip.Addr
	med     uint32
	asPath  string
	comms   []uint32
	large   []string
	stale   bool
}

func (r *fakeRouter) routes(t *testing.T) map[netip.Prefix]route {
	t.Helper()
	out := map[netip.Prefix]route{}
	err := r.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: gbgp.RF_IPv4_UC}, func(nlri gbgp.NLRI, paths []*apiutil.Path) {
		for _, p := range paths {
			pfx, err := netip.ParsePrefix(nlri.String())
			if err != nil {
				t.Errorf("nlri %v: %v", nlri, err)
				continue
			}
			var rt route
			rt.stale = p.Stale
			for _, a := range p.Attrs {
				switch v := a.(type) {
				case *gbgp.PathAttributeNextHop:
					rt.nexthop = v.Value
				case *gbgp.PathAttributeMultiExitDisc:
					rt.med = v.Value
				case *gbgp.PathAttributeAsPath:
					rt.asPath = v.String()
				case *gbgp.PathAttributeCommunities:
					rt.comms = v.Value
				case *gbgp.PathAttributeLargeCommunities:
					for _, c := range v.Values {
						rt.large = append(rt.large, c.String())
					}
				}
			}
			out[pfx] = rt
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, strings.TrimSpace(string(p)))
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

func startSpeaker(t *testing.T, r *fakeRouter, o Options) (*Speaker, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	o.LocalAS, o.RouterID, o.HoldTime = 65001, netip.MustParseAddr("192.0.2.2"), 3*time.Second
	o.Peers = []Peer{{Address: netip.MustParseAddr("127.0.0.2"), AS: 65000, Port: uint16(r.port)}}
	o.Log = slog.New(slog.NewTextHandler(logs, nil))
	s, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	waitUntil(t, 20*time.Second, "session established", func() bool { return s.Peers()[0].Established() })
	return s, logs
}

func TestAnnounceWithdraw(t *testing.T) {
	r := startFakeRouter(t, false)
	var changes sync.Map
	s, logs := startSpeaker(t, r, Options{
		Attrs:        Attributes{MED: 7, Communities: []uint32{65000<<16 | 80}, LargeCommunities: []LargeCommunity{{65001, 0, 80}}},
		OnPeerChange: func(p PeerStatus) { changes.Store(p.State, true) },
	})
	if _, ok := changes.Load("established"); !ok {
		t.Errorf("OnPeerChange did not see established")
	}
	vip := HostPrefix(netip.MustParseAddr("203.0.113.10"))
	if vip.String() != "203.0.113.10/32" {
		t.Fatalf("host prefix %v", vip)
	}
	if err := s.Announce(vip); err != nil {
		t.Fatal(err)
	}
	if err := s.Announce(vip); err != nil { // idempotent
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "route at the router", func() bool { _, ok := r.routes(t)[vip]; return ok })
	got := r.routes(t)[vip]
	want := route{nexthop: netip.MustParseAddr("127.0.0.1"), med: 7, asPath: "{AsPath: 65001}", comms: []uint32{65000<<16 | 80}, large: []string{"65001:0:80"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("router got %+v, want %+v", got, want)
	}
	ps := s.Peers()
	if len(ps) != 1 || !slices.Equal(ps[0].Announced, []netip.Prefix{vip}) || ps[0].AS != 65000 || ps[0].Since.IsZero() {
		t.Errorf("peers %+v", ps)
	}
	if a := s.Announced(); !slices.Equal(a, []netip.Prefix{vip}) {
		t.Errorf("announced %v", a)
	}

	if err := s.SetAttributes(Attributes{MED: 9}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "new MED at the router", func() bool { rt := r.routes(t)[vip]; return rt.med == 9 && rt.comms == nil })

	start := time.Now()
	if err := s.Withdraw(vip); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "route withdrawn", func() bool { _, ok := r.routes(t)[vip]; return !ok })
	t.Logf("withdrawn at the fake router %v after Withdraw", time.Since(start).Round(time.Millisecond))
	if err := s.Withdraw(vip); err != nil { // idempotent
		t.Fatal(err)
	}
	if len(s.Announced()) != 0 || len(s.Peers()[0].Announced) != 0 {
		t.Errorf("still announced: %v", s.Announced())
	}

	// Close ends the session with a NOTIFICATION: the router sees it go.
	if err := s.Announce(vip); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "route back", func() bool { _, ok := r.routes(t)[vip]; return ok })
	s.Close()
	waitUntil(t, 10*time.Second, "route gone after Close", func() bool { _, ok := r.routes(t)[vip]; return !ok })
	if err := s.Announce(vip); err == nil {
		t.Errorf("Announce after Close succeeded")
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("error lines in the log:\n%s", logs)
	}
	t.Logf("log:\n%s", logs)
}

// TestDetachKeepsRoutes: with graceful restart, Detach leaves the routes
// at the router (stale) and a successor speaker takes them over; without
// it (TestAnnounceWithdraw) Close removes them.
func TestDetachKeepsRoutes(t *testing.T) {
	r := startFakeRouter(t, true)
	vip := HostPrefix(netip.MustParseAddr("203.0.113.10"))
	s, _ := startSpeaker(t, r, Options{GracefulRestart: 30 * time.Second})
	if err := s.Announce(vip); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "route at the router", func() bool { _, ok := r.routes(t)[vip]; return ok })
	s.Detach()
	// The router marks the route stale once it has seen the session go,
	// which a loaded machine may take a while to run; it must never drop
	// it meanwhile.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rt, ok := r.routes(t)[vip]
		if !ok || (!rt.stale && time.Now().After(deadline)) {
			t.Fatalf("after Detach the router has %+v (present %v), want the route kept as stale", rt, ok)
		}
		if rt.stale {
			break
		}
	}
	s2, _ := startSpeaker(t, r, Options{GracefulRestart: 30 * time.Second})
	if err := s2.Announce(vip); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 15*time.Second, "route refreshed by the successor", func() bool { rt, ok := r.routes(t)[vip]; return ok && !rt.stale })
}

func TestOptionsRejected(t *testing.T) {
	for _, o := range []Options{
		{LocalAS: 0, RouterID: netip.MustParseAddr("192.0.2.2"), HoldTime: 3 * time.Second},
		{LocalAS: 65001, RouterID: netip.MustParseAddr("2001:db8::2"), HoldTime: 3 * time.Second},
		{LocalAS: 65001, RouterID: netip.MustParseAddr("192.0.2.2"), HoldTime: 2 * time.Second},
		{LocalAS: 65001, RouterID: netip.MustParseAddr("192.0.2.2"), HoldTime: 3500 * time.Millisecond},
	} {
		if s, err := Start(context.Background(), o); err == nil {
			s.Close()
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper())
	}
	os.Exit(m.Run())
}

// TestSetPeers: a reload that removes a router ends its session (the
// router drops our route); adding it back announces what is announced.
func TestSetPeers(t *testing.T) {
	r := startFakeRouter(t, false)
	s, _ := startSpeaker(t, r, Options{})
	vip := HostPrefix(netip.MustParseAddr("203.0.113.10"))
	if err := s.Announce(vip); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "route at the router", func() bool { _, ok := r.routes(t)[vip]; return ok })
	peers := []Peer{{Address: netip.MustParseAddr("127.0.0.2"), AS: 65000, Port: uint16(r.port)}}
	if err := s.SetPeers(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if len(s.Peers()) != 0 {
		t.Errorf("peers after removing all: %+v", s.Peers())
	}
	waitUntil(t, 10*time.Second, "route gone with the peer", func() bool { _, ok := r.routes(t)[vip]; return !ok })
	if err := s.SetPeers(context.Background(), peers); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "route back with the peer", func() bool { _, ok := r.routes(t)[vip]; return ok })
	// The same list again changes nothing: the session stays up.
	since := s.Peers()[0].Since
	if err := s.SetPeers(context.Background(), peers); err != nil {
		t.Fatal(err)
	}
	if p := s.Peers()[0]; !p.Established() || !p.Since.Equal(since) {
		t.Errorf("unchanged peer list reset the session: %+v", p)
	}
}

// TestImportsNothing: a route the router sends is rejected; only the
// speaker's own paths are in its table.
func TestImportsNothing(t *testing.T) {
	r := startFakeRouter(t, false)
	s, _ := startSpeaker(t, r, Options{})
	theirs := netip.MustParsePrefix("198.51.100.0/24")
	nlri, _ := gbgp.NewIPAddrPrefix(theirs)
	nh, _ := gbgp.NewPathAttributeNextHop(netip.MustParseAddr("127.0.0.2"))
	if _, err := r.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{{Family: gbgp.RF_IPv4_UC, Nlri: nlri, Attrs: []gbgp.PathAttributeInterface{gbgp.NewPathAttributeOrigin(0), nh}}}}); err != nil {
		t.Fatal(err)
	}
	ours := HostPrefix(netip.MustParseAddr("203.0.113.10"))
	if err := s.Announce(ours); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "our route at the router", func() bool { _, ok := r.routes(t)[ours]; return ok })
	list := func(table api.TableType, name string) []string {
		var got []string
		err := s.srv.ListPath(apiutil.ListPathRequest{TableType: table, Name: name, Family: gbgp.RF_IPv4_UC, EnableFiltered: true}, func(n gbgp.NLRI, ps []*apiutil.Path) {
			for _, p := range ps {
				got = append(got, fmt.Sprintf("%s filtered=%v", n, p.Filtered))
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// The router's route did arrive (adj-rib-in), and was not imported.
	waitUntil(t, 10*time.Second, "the router's route received", func() bool { return len(list(api.TableType_TABLE_TYPE_ADJ_IN, "127.0.0.2")) == 1 })
	if got := list(api.TableType_TABLE_TYPE_GLOBAL, ""); len(got) != 1 || !strings.HasPrefix(got[0], ours.String()) {
		t.Errorf("speaker's table %v, want only %s", got, ours)
	}
}

// TestAdminStateSettles: a BGP peer whose admin state does not follow its
// BFD session — here disabled behind the speaker's back while BFD holds
// nothing, as when GoBGP dropped the enable of a session that went Down
// and Up within milliseconds — is enabled again by settleAdmin, and its
// session comes back.
func TestAdminStateSettles(t *testing.T) {
	r := startFakeRouter(t, false)
	s, _ := startSpeaker(t, r, Options{})
	peer := netip.MustParseAddr("127.0.0.2")
	if err := s.srv.DisablePeer(context.Background(), &api.DisablePeerRequest{Address: peer.String(), Communication: "test"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "peer administratively down", func() bool { down, ok := s.adminDown(peer); return ok && down })
	s.settleAdmin(peer)
	waitUntil(t, 10*time.Second, "peer enabled again", func() bool { down, ok := s.adminDown(peer); return ok && !down })
	waitUntil(t, 20*time.Second, "session established again", func() bool { return s.Peers()[0].Established() })
}
