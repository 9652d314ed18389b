package lab_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/ethtool"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/lab/labtest"
	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// up builds a small lab with a per-test prefix and tears it down when the
// test ends, checking that nothing is left behind.
func up(t *testing.T, o lab.Options) *lab.Lab {
	t.Helper()
	return labtest.Up(t, "lt", o)
}

func TestLabHTTPThroughVIPWithKernelStandIn(t *testing.T) {
	l := up(t, lab.Options{Backends: 2, ClientAddrs: 20})
	const target = 1
	if err := l.KernelForward(target); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		vip  netip.Addr
		srcs []netip.Addr
	}{
		{l.Opts.VIP4, l.ClientAddrs4},
		{l.Opts.VIP6, l.ClientAddrs6},
	} {
		for _, src := range []netip.Addr{tc.srcs[0], tc.srcs[len(tc.srcs)-1]} {
			rep, err := l.HTTPGet(ctx, src, l.VIPURL(tc.vip))
			if err != nil {
				t.Fatal(err)
			}
			if rep.Index != target || rep.Backend != l.Backends[target].Name {
				t.Errorf("%v: served by %s (%d), want backend %d", src, rep.Backend, rep.Index, target)
			}
			if rep.Remote.Addr() != src {
				t.Errorf("server saw client %v, want %v (no NAT)", rep.Remote, src)
			}
			if rep.Local != netip.AddrPortFrom(tc.vip, l.Opts.HTTPPort) {
				t.Errorf("server's local address %v, want the VIP %v:%d", rep.Local, tc.vip, l.Opts.HTTPPort)
			}
		}
	}
	if got := l.Backends[target].Stats().HTTPRequests; got != 4 {
		t.Errorf("backend %d counted %d requests, want 4", target, got)
	}
	if got := l.Backends[0].Stats().HTTPRequests; got != 0 {
		t.Errorf("backend 0 counted %d requests, want 0", got)
	}

	// A 3000-byte datagram leaves the 1500-byte client link in fragments
	// and must arrive whole at one backend.
	for _, tc := range []struct{ src, vip netip.Addr }{{l.ClientAddrs4[3], l.Opts.VIP4}, {l.ClientAddrs6[3], l.Opts.VIP6}} {
		rep, err := l.UDPWho(ctx, tc.src, netip.AddrPortFrom(tc.vip, l.Opts.UDPPort), 3000)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Size != 3000 || rep.Index != target || rep.Remote.Addr().Unmap() != tc.src {
			t.Errorf("udp who from %v: %+v, want size 3000 at backend %d from the client", tc.src, rep, target)
		}
	}
	echo := []byte("echo through the lab")
	out, err := l.UDPExchange(ctx, l.ClientAddrs4[5], netip.AddrPortFrom(l.Opts.VIP4, l.Opts.UDPPort), echo)
	if err != nil || string(out) != string(echo) {
		t.Errorf("udp echo = %q, %v; want %q", out, err, echo)
	}

	// Moving the stand-in moves the traffic.
	if err := l.KernelForward(0); err != nil {
		t.Fatal(err)
	}
	rep, err := l.HTTPGet(ctx, l.ClientAddrs4[7], l.VIPURL(l.Opts.VIP4))
	if err != nil || rep.Index != 0 {
		t.Errorf("after moving the stand-in: %+v, %v; want backend 0", rep, err)
	}
	if err := l.StopKernelForward(); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := l.HTTPGet(short, l.ClientAddrs4[8], l.VIPURL(l.Opts.VIP4)); err == nil {
		t.Error("HTTP through the VIP works without any forwarder")
	}
}

func TestLabTopology(t *testing.T) {
	l := up(t, lab.Options{Backends: 3, ClientAddrs: 250, Queues: 4})
	if len(l.ClientAddrs4) != 250 || len(l.ClientAddrs6) != 250 {
		t.Fatalf("client addresses: %d v4, %d v6; want 250 each", len(l.ClientAddrs4), len(l.ClientAddrs6))
	}
	out, err := l.Client.Output("ip", "-o", "addr", "show", "dev", lab.ClientInterface)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []netip.Addr{l.ClientAddrs4[249], l.ClientAddrs6[249]} {
		if !strings.Contains(out, " "+a.String()+"/") {
			t.Errorf("client lacks %v", a)
		}
	}
	link, err := l.XLB.Output("ip", "-d", "link", "show", lab.XLBInterface)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mtu 3500", "numtxqueues 4", "numrxqueues 4"} {
		if !strings.Contains(link, want) {
			t.Errorf("appliance link lacks %q: %s", want, link)
		}
	}
	// The ethtool ioctl, not the binary: go test needs no ethtool(8).
	err = l.Router.Do(func() error {
		for _, c := range []struct {
			name string
			cmd  uint32
		}{{"tx-checksumming", ethtool.GTXCSUM}, {"scatter-gather", ethtool.GSG}, {"tcp-segmentation-offload", ethtool.GTSO}, {"generic-segmentation-offload", ethtool.GGSO}} {
			if v, err := ethtool.Get(lab.RouterApplianceLink, c.cmd); err != nil || v != 0 {
				t.Errorf("%s towards the appliance: %d, %v; want off", c.name, v, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if link, _ := l.Client.Output("ip", "link", "show", lab.ClientInterface); !strings.Contains(link, "mtu 1500") {
		t.Errorf("client link not mtu 1500: %s", link)
	}
	// The router's MAC must still be what the lab reported once every port
	// is on the bridge (a bridge without its own MAC takes its ports').
	if br, err := l.Router.Output("cat", "/sys/class/net/"+lab.Bridge+"/address"); err != nil || strings.TrimSpace(br) != l.GatewayMAC.String() {
		t.Errorf("bridge MAC %q (%v), lab says %v", br, err, l.GatewayMAC)
	}
	for _, b := range l.Backends {
		rp, err := b.NS.Output("cat", "/proc/sys/net/ipv4/conf/all/arp_ignore", "/proc/sys/net/ipv4/conf/all/arp_announce")
		if err != nil || rp != "1\n2\n" {
			t.Errorf("%s arp_ignore/arp_announce = %q, %v; want 1, 2", b.Name, rp, err)
		}
		if len(b.MAC) != 6 {
			t.Errorf("%s has no MAC", b.Name)
		}
	}
	// L3 reachability of every backend's tunnel address from the
	// appliance goes through the router.
	for _, b := range l.Backends {
		for _, a := range []netip.Addr{b.Tunnel4, b.Tunnel6} {
			route, err := l.XLB.Output("ip", "route", "get", a.String())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(route, "via "+gateway(l, a).String()) {
				t.Errorf("route to %v from the appliance: %q, want via the router", a, route)
			}
			url := fmt.Sprintf("http://%s/healthz", netip.AddrPortFrom(a, l.Opts.HealthPort))
			if code, _, err := getIn(l.XLB, url); err != nil || code != 200 {
				t.Errorf("health check of %s at its tunnel address %v: %d, %v", b.Name, a, code, err)
			}
		}
	}
	// Health endpoints answer on the link address, with weight and health
	// under the test's control.
	b := l.Backends[2]
	b.SetWeight(7)
	code, hdr, err := getIn(l.XLB, fmt.Sprintf("http://%s/healthz", netip.AddrPortFrom(b.Link4, l.Opts.HealthPort)))
	if err != nil || code != 200 || hdr.Get(lab.WeightHeader) != "7" {
		t.Errorf("health of %s: %d %v, %v; want 200 with weight 7", b.Name, code, hdr, err)
	}
	b.SetHealthy(false)
	b.SetWeight(-1)
	code, hdr, err = getIn(l.XLB, fmt.Sprintf("http://%s/healthz", netip.AddrPortFrom(b.Link6, l.Opts.HealthPort)))
	if err != nil || code != 503 || hdr.Get(lab.WeightHeader) != "" {
		t.Errorf("unhealthy %s: %d %v, %v; want 503 without weight", b.Name, code, hdr, err)
	}
}

// getIn fetches url with a connection made inside ns.
func getIn(ns *netns.NS, url string) (int, http.Header, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
			err = ns.Do(func() error {
				conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return conn, err
		},
	}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header, nil
}

func gateway(l *lab.Lab, a netip.Addr) netip.Addr {
	if a.Is4() {
		return l.Gateway4
	}
	return l.Gateway6
}

func TestUpRefusesExistingLabAndDownRemovesIt(t *testing.T) {
	testutil.RequireRoot(t)
	prefix := testutil.Unique("ld") + "-"
	ctx := context.Background()
	l, err := lab.Up(ctx, lab.Options{Prefix: prefix, Backends: 1, ClientAddrs: 2, NoDecap: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := lab.Up(ctx, lab.Options{Prefix: prefix, Backends: 1, ClientAddrs: 2, NoDecap: true}); err == nil || !strings.Contains(err.Error(), "remove it first with `xlb lab down --prefix "+prefix+"`") {
		t.Fatalf("second Up with the same prefix: %v; want the command that removes the first", err)
	}
	if n := len(lab.Namespaces(prefix)); n != 4 {
		t.Fatalf("%d namespaces, want 4 (client, router, xlb, be0)", n)
	}
	// Namespaces that only start with the prefix are not the lab's: Down
	// leaves them (it once deleted every one).
	var others []string
	for _, suffix := range []string{"other", "be", "be01", "xlbx", "clients"} {
		ns, err := netns.New(prefix + suffix)
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Delete()
		others = append(others, ns.Name)
	}
	removed, err := lab.Down(prefix)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{prefix + "be0", prefix + "client", prefix + "router", prefix + "xlb"}; !slices.Equal(removed, want) {
		t.Errorf("Down removed %v, want %v", removed, want)
	}
	if left := lab.Namespaces(prefix); len(left) != 0 {
		t.Fatalf("Down left %v", left)
	}
	for _, name := range others {
		if !netns.Exists(name) {
			t.Errorf("Down removed %s, which is not the lab's", name)
		}
	}
	if _, err := lab.Down(""); err == nil {
		t.Fatal("Down with an empty prefix succeeded")
	}
}

func TestUpCleansUpAfterFailure(t *testing.T) {
	testutil.RequireRoot(t)
	prefix := testutil.Unique("lf") + "-"
	// Cancel halfway: after the backends' namespaces and links exist, before
	// their servers start.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logf := func(format string, args ...any) {
		if strings.HasSuffix(fmt.Sprintf(format, args...), ": backends") {
			cancel()
		}
	}
	l, err := lab.Up(ctx, lab.Options{Prefix: prefix, Backends: 2, ClientAddrs: 2, Logf: logf})
	if err == nil {
		l.Close()
		t.Fatal("Up succeeded with a cancelled context")
	}
	if l != nil {
		t.Error("failed Up returned a lab")
	}
	if left := lab.Namespaces(prefix); len(left) != 0 {
		lab.Down(prefix)
		t.Fatalf("failed Up (%v) left %v", err, left)
	}
}

func TestOptionsRejected(t *testing.T) {
	for name, tc := range map[string]struct {
		o    lab.Options
		want string
	}{
		"too many backends": {lab.Options{Backends: 151}, "backends 151 outside 1..150"},
		"too many clients":  {lab.Options{ClientAddrs: lab.MaxClientAddrs + 1}, fmt.Sprintf("client addresses %d outside 1..%d", lab.MaxClientAddrs+1, lab.MaxClientAddrs)},
		"tiny mtu":          {lab.Options{FabricMTU: 1000}, "mtu 1000 outside 1280..65535 (IPv6 needs 1280)"},
		"vip in plan":       {lab.Options{VIP4: netip.MustParseAddr("198.18.0.50")}, "vip inside the lab's own 198.18.0.0/24"},
		"v6 as v4 vip":      {lab.Options{VIP4: netip.MustParseAddr("fd00::1")}, "vip4 must be IPv4 and vip6 IPv6"},
		"slash in prefix":   {lab.Options{Prefix: "a/b"}, `prefix "a/b": want at most 40 characters, no slash or space`},
		"same ports":        {lab.Options{HTTPPort: 8080}, "http and health port are both 8080"},
	} {
		o := tc.o
		if o.Prefix == "" {
			// A unique prefix: an Up accepted by mistake must neither
			// meet nor leave behind the default lab.
			o.Prefix = testutil.Unique("lr") + "-"
		}
		l, err := lab.Up(context.Background(), o)
		if err == nil {
			l.Close()
			t.Errorf("%s: Up accepted %+v", name, o)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}
