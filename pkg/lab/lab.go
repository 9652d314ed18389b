package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/xlbnet/xlb/pkg/netns"
)

// Interface names. Each lives in a namespace the lab created, so fixed
// names never collide between parallel labs.
const (
	// XLBInterface is the appliance's one arm.
	XLBInterface = "eth0"
	// BackendInterface is each backend's link to the bridge.
	BackendInterface = "eth0"
	// ClientInterface is the client's link to the router.
	ClientInterface = "eth0"
	// Bridge is the fabric bridge in the router namespace.
	Bridge = "br0"
	// RouterApplianceLink is the router's end of the appliance's veth (a
	// port of the bridge).
	RouterApplianceLink = "lb0"
	// routerClientPort and routerBackendPort(i) are the router-side ends
	// of the other veths.
	routerClientPort = "cl0"
)

func routerBackendPort(i int) string { return "be" + strconv.Itoa(i) }

// GatewayMACAddr is the router's MAC on the bridge (locally administered;
// every lab is its own L2 segment, so all labs can share it).
const GatewayMACAddr = "02:78:6c:62:00:01"

// Lab is a running testbed. Its servers run in this process: the lab works
// as long as the process that called Up lives, and Close (or Down after a
// crash) removes it.
type Lab struct {
	Opts Options

	Client, Router, XLB *netns.NS
	Backends            []*Backend
	// Appliances are the appliance namespaces (fleet.go); Appliances[0]
	// is XLB, with the XLB* addresses below.
	Appliances []*Appliance

	// ClientAddrs4 and ClientAddrs6 are the client's source addresses.
	ClientAddrs4, ClientAddrs6 []netip.Addr
	// XLBAddr4/6 are the appliance's addresses on the fabric; Gateway4/6
	// the router's (the appliance's next hop for everything but DIRECT).
	XLBAddr4, XLBAddr6, Gateway4, Gateway6 netip.Addr
	// XLBMAC is the appliance's MAC, GatewayMAC the router's on the bridge.
	XLBMAC, GatewayMAC net.HardwareAddr

	bird *birdProcess // the router's BGP daemon when Opts.BGP (Router BIRD)
	frr  *frrProcess  // … or FRR

	mu         sync.Mutex
	namespaces []*netns.NS // everything to delete, in creation order
	closers    []func()
	closed     bool
}

// Up builds the lab: namespaces, links, addresses, routes, sysctls, then
// starts the backends' servers and decapsulators. On failure everything it
// created is removed before it returns the error.
func Up(ctx context.Context, opts Options) (_ *Lab, err error) {
	if err := opts.setDefaults(); err != nil {
		return nil, fmt.Errorf("lab options: %w", err)
	}
	l := &Lab{Opts: opts}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if nss := Namespaces(opts.Prefix); len(nss) > 0 {
		return nil, fmt.Errorf("lab %q exists (namespace %s): remove it first with `xlb lab down --prefix %s`", opts.Prefix, nss[0], opts.Prefix)
	}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"create namespaces", l.createNamespaces},
		{"router", l.setupRouter},
		{"client", l.setupClient},
		{"appliances", l.setupAppliances},
		{"backends", l.setupBackends},
		{"servers", l.startServers},
	}
	if opts.BGP {
		// After the appliances: the sessions need their links.
		start := l.startBIRD
		if opts.Router == RouterFRR {
			start = l.startFRR
		}
		steps = append(steps, struct {
			name string
			fn   func() error
		}{"router bgp (" + opts.Router + ")", start})
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lab up: %w", err)
		}
		opts.Logf("lab %s: %s", opts.Prefix, s.name)
		if err := s.fn(); err != nil {
			return nil, fmt.Errorf("lab up: %s: %w", s.name, err)
		}
	}
	return l, nil
}

// Close stops the servers and decapsulators and deletes every namespace
// (which destroys the veths and the bridge with them). Safe to call more
// than once; it returns the first deletion error.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	closers, nss := l.closers, l.namespaces
	l.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
	var first error
	for i := len(nss) - 1; i >= 0; i-- {
		if err := nss[i].Delete(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Down deletes the namespaces of the lab with this prefix, for `xlb lab
// down` after a crash, and returns their names: only the names a lab
// creates (Namespaces), never another namespace that merely starts with
// the prefix. It refuses an empty prefix.
func Down(prefix string) ([]string, error) {
	if prefix == "" {
		return nil, errors.New("lab down: empty prefix would delete every namespace")
	}
	var removed []string
	var errs []error
	for _, name := range Namespaces(prefix) {
		stopRouterDaemonsIn(name)
		if err := (&netns.NS{Name: name}).Delete(); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// Namespaces lists the existing namespaces of the lab with this prefix:
// prefix followed by client, router, xlb, xlb<N> (a fleet's appliances)
// or be<N> (backends), as Up names them.
func Namespaces(prefix string) []string {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if rest, ok := strings.CutPrefix(e.Name(), prefix); ok && labSuffix(rest) {
			names = append(names, e.Name())
		}
	}
	return names
}

// labSuffix reports whether a namespace name after the lab's prefix is
// one Up creates.
func labSuffix(s string) bool {
	switch s {
	case "client", "router", "xlb":
		return true
	}
	for _, p := range []string{"xlb", "be"} {
		if n, ok := strings.CutPrefix(s, p); ok && n != "" && strings.Trim(n, "0123456789") == "" && (n == "0" || n[0] != '0') {
			return true
		}
	}
	return false
}

func (l *Lab) onClose(f func()) {
	l.mu.Lock()
	l.closers = append(l.closers, f)
	l.mu.Unlock()
}

func (l *Lab) newNS(suffix string) (*netns.NS, error) {
	ns, err := netns.New(l.Opts.Prefix + suffix)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.namespaces = append(l.namespaces, ns)
	l.mu.Unlock()
	// No duplicate address detection: nothing else uses these links, and a
	// tentative address would delay the first packets by seconds.
	if err := sysctls(ns, map[string]string{
		"net/ipv6/conf/all/accept_dad":     "0",
		"net/ipv6/conf/default/accept_dad": "0",
	}); err != nil {
		return nil, err
	}
	return ns, nil
}

func (l *Lab) createNamespaces() error {
	var err error
	if l.Router, err = l.newNS("router"); err != nil {
		return err
	}
	if l.Client, err = l.newNS("client"); err != nil {
		return err
	}
	if err := l.capRTO(l.Client); err != nil {
		return err
	}
	for i := range l.Opts.Appliances {
		ns, err := l.newNS(applianceNS(i))
		if err != nil {
			return err
		}
		l.Appliances = append(l.Appliances, &Appliance{Index: i, NS: ns})
	}
	l.XLB = l.Appliances[0].NS
	for i := range l.Opts.Backends {
		ns, err := l.newNS("be" + strconv.Itoa(i))
		if err != nil {
			return err
		}
		if err := l.capRTO(ns); err != nil {
			return err
		}
		l.Backends = append(l.Backends, newBackend(l, i, ns))
	}
	return nil
}

// capRTO applies Options.TCPRTOMax to ns, a namespace with TCP endpoints.
func (l *Lab) capRTO(ns *netns.NS) error {
	if l.Opts.TCPRTOMax == 0 {
		return nil
	}
	if _, err := os.Stat("/proc/sys/net/ipv4/tcp_rto_max_ms"); err != nil {
		return fmt.Errorf("TCP retransmission timeout cap: this kernel has no net.ipv4.tcp_rto_max_ms (Linux 6.15+): %w", err)
	}
	return sysctls(ns, map[string]string{"net/ipv4/tcp_rto_max_ms": strconv.FormatInt(l.Opts.TCPRTOMax.Milliseconds(), 10)})
}

// setupRouter creates the bridge, the client link and the router's
// addresses and routes; the veths to the appliance and the backends are
// added by their own steps.
func (l *Lab) setupRouter() error {
	o := l.Opts
	r := l.Router
	l.Gateway4, l.Gateway6 = host(FabricNet4, hostRouter), host(FabricNet6, hostRouter)
	mtu := strconv.Itoa(o.FabricMTU)
	cmds := []string{
		// An explicit MAC: otherwise the bridge takes the lowest MAC of its
		// ports and changes it as ports come and go, under the feet of
		// anyone who read GatewayMAC.
		"link add " + Bridge + " address " + GatewayMACAddr + " mtu " + mtu + " type bridge stp_state 0 mcast_snooping 0",
		fmt.Sprintf("addr add %s dev %s", pfx(l.Gateway4, FabricNet4), Bridge),
		fmt.Sprintf("addr add %s dev %s nodad", pfx(l.Gateway6, FabricNet6), Bridge),
		"link set " + Bridge + " up",
		// Client link: cl0 here, eth0 in the client namespace.
		fmt.Sprintf("link add %s mtu %d type veth peer name %s mtu %d netns %s", routerClientPort, o.ClientMTU, ClientInterface, o.ClientMTU, l.Client.Name),
		fmt.Sprintf("addr add %s dev %s", pfx(host(ClientNet4, hostRouter), ClientNet4), routerClientPort),
		fmt.Sprintf("addr add %s dev %s nodad", pfx(host(ClientNet6, hostRouter), ClientNet6), routerClientPort),
		"link set " + routerClientPort + " up",
		fmt.Sprintf("route add %s via %s dev %s", ClientExtraNet4, host(ClientNet4, hostFirstClient), routerClientPort),
	}
	if err := batch(r, cmds); err != nil {
		return err
	}
	// Forwarding on; no ICMP redirects: the router hairpins tunnel traffic
	// from the appliance back out of the bridge it came in on, on purpose.
	if err := sysctls(r, map[string]string{
		"net/ipv4/ip_forward":                         "1",
		"net/ipv6/conf/all/forwarding":                "1",
		"net/ipv4/conf/all/send_redirects":            "0",
		"net/ipv4/conf/default/send_redirects":        "0",
		"net/ipv4/conf/" + Bridge + "/send_redirects": "0",
	}); err != nil {
		return err
	}
	mac, err := linkMAC(r, Bridge)
	if err != nil {
		return err
	}
	l.GatewayMAC = mac
	return nil
}

func (l *Lab) setupClient() error {
	o := l.Opts
	cmds := []string{"link set " + ClientInterface + " up"}
	for i := range o.ClientAddrs {
		a6 := host(ClientNet6, hostFirstClient+i)
		l.ClientAddrs6 = append(l.ClientAddrs6, a6)
		cmds = append(cmds, fmt.Sprintf("addr add %s dev %s nodad", pfx(a6, ClientNet6), ClientInterface))
		if i < clientLinkAddrs {
			a4 := host(ClientNet4, hostFirstClient+i)
			l.ClientAddrs4 = append(l.ClientAddrs4, a4)
			cmds = append(cmds, fmt.Sprintf("addr add %s dev %s", pfx(a4, ClientNet4), ClientInterface))
			continue
		}
		// Past the client link's /24: /32s from ClientExtraNet4, which
		// the router routes to the client.
		a4 := host(ClientExtraNet4, 1+i-clientLinkAddrs)
		l.ClientAddrs4 = append(l.ClientAddrs4, a4)
		cmds = append(cmds, fmt.Sprintf("addr add %s/32 dev %s", a4, ClientInterface))
	}
	cmds = append(cmds,
		"route add default via "+host(ClientNet4, hostRouter).String(),
		"route add ::/0 via "+host(ClientNet6, hostRouter).String())
	if err := batch(l.Client, cmds); err != nil {
		return err
	}
	// Over veth a flow's receive queue at the appliance is the queue the
	// router sends it on, chosen from the client socket's random hash
	// (skb->hash survives veth and forwarding). TCP draws a new one after
	// a retransmission timeout, which would move a flow to the other queue
	// (and its tracked entry out of reach) during a daemon's restart pause.
	// A NIC's RSS hashes the headers, stable for a flow: keep the hash.
	if _, err := os.Stat("/proc/sys/net/core/txrehash"); err == nil { // Linux 5.18+
		return sysctls(l.Client, map[string]string{"net/core/txrehash": "0"})
	}
	return nil
}

// setupAppliances links every appliance to the bridge. Without BGP the
// router routes the VIPs to the first appliance statically; with BGP the
// appliances announce them and BIRD installs the (multipath) route.
func (l *Lab) setupAppliances() error {
	for _, a := range l.Appliances {
		if err := l.setupAppliance(a); err != nil {
			return fmt.Errorf("appliance %d: %w", a.Index, err)
		}
	}
	a0 := l.Appliances[0]
	l.XLBAddr4, l.XLBAddr6, l.XLBMAC = a0.Addr4, a0.Addr6, a0.MAC
	if l.Opts.BGP {
		return nil
	}
	o := l.Opts
	return batch(l.Router, []string{
		fmt.Sprintf("route add %s via %s", pfx(o.VIP4, netip.PrefixFrom(o.VIP4, 32)), l.XLBAddr4),
		fmt.Sprintf("route add %s via %s", pfx(o.VIP6, netip.PrefixFrom(o.VIP6, 128)), l.XLBAddr6),
	})
}

func (l *Lab) setupAppliance(a *Appliance) error {
	o := l.Opts
	a.Addr4, a.Addr6 = host(FabricNet4, hostXLB+a.Index), host(FabricNet6, hostXLB+a.Index)
	a.RouterLink = applianceRouterLink(a.Index)
	q := strconv.Itoa(o.Queues)
	err := batch(l.Router, []string{
		fmt.Sprintf("link add %s mtu %d numtxqueues %s numrxqueues %s type veth peer name %s mtu %d numtxqueues %s numrxqueues %s netns %s",
			a.RouterLink, o.FabricMTU, q, q, XLBInterface, o.FabricMTU, q, q, a.NS.Name),
		"link set " + a.RouterLink + " master " + Bridge,
		"link set " + a.RouterLink + " up",
	})
	if err != nil {
		return err
	}
	if !o.KeepOffloads {
		// veth hands the peer checksum-offloaded packets (only the
		// pseudo-header summed) and 64 KB TSO segments. The kernel copes;
		// a userspace forwarder that reads raw frames through AF_XDP and
		// sends them on would pass broken checksums and oversize frames to
		// the backends. So the router computes checksums and segments
		// before anything reaches the appliance.
		if err := disableOffloads(l.Router, a.RouterLink); err != nil {
			return err
		}
	}
	err = batch(a.NS, []string{
		fmt.Sprintf("addr add %s dev %s", pfx(a.Addr4, FabricNet4), XLBInterface),
		fmt.Sprintf("addr add %s dev %s nodad", pfx(a.Addr6, FabricNet6), XLBInterface),
		"link set " + XLBInterface + " up",
		"route add default via " + l.Gateway4.String(),
		"route add ::/0 via " + l.Gateway6.String(),
		// Tunnel addresses are reached through the router (L3), even
		// though router and backends share the bridge with us.
		fmt.Sprintf("route add %s via %s", TunnelNet4, l.Gateway4),
		fmt.Sprintf("route add %s via %s", TunnelNet6, l.Gateway6),
	})
	if err != nil {
		return err
	}
	// Ignore the router's IPv6 redirects for the hairpinned tunnel traffic
	// (IPv6 has no send_redirects switch on the router side).
	if err := sysctls(a.NS, map[string]string{
		"net/ipv4/conf/all/accept_redirects":                  "0",
		"net/ipv6/conf/all/accept_redirects":                  "0",
		"net/ipv6/conf/" + XLBInterface + "/accept_redirects": "0",
		"net/ipv4/conf/all/send_redirects":                    "0",
		"net/ipv4/conf/" + XLBInterface + "/send_redirects":   "0",
	}); err != nil {
		return err
	}
	a.MAC, err = linkMAC(a.NS, XLBInterface)
	return err
}

func (l *Lab) setupBackends() error {
	o := l.Opts
	var routes []string
	for _, b := range l.Backends {
		port := routerBackendPort(b.Index)
		err := batch(l.Router, []string{
			fmt.Sprintf("link add %s mtu %d type veth peer name %s mtu %d netns %s", port, o.FabricMTU, BackendInterface, o.FabricMTU, b.NS.Name),
			"link set " + port + " master " + Bridge,
			"link set " + port + " up",
		})
		if err != nil {
			return err
		}
		err = batch(b.NS, []string{
			fmt.Sprintf("addr add %s dev %s", pfx(b.Link4, FabricNet4), BackendInterface),
			fmt.Sprintf("addr add %s dev %s nodad", pfx(b.Link6, FabricNet6), BackendInterface),
			"link set " + BackendInterface + " up",
			"addr add " + b.Tunnel4.String() + "/32 dev lo",
			// nodad: even on lo a new IPv6 address is tentative until the
			// DAD work runs, and a server binding it at once fails under load.
			"addr add " + b.Tunnel6.String() + "/128 dev lo nodad",
			"addr add " + o.VIP4.String() + "/32 dev lo",
			"addr add " + o.VIP6.String() + "/128 dev lo nodad",
			"route add default via " + l.Gateway4.String(),
			"route add ::/0 via " + l.Gateway6.String(),
		})
		if err != nil {
			return err
		}
		// DIRECT: the VIP on lo must not be announced or answered on the
		// bridge, or the router and the appliance would learn a backend's
		// MAC for it.
		if err := sysctls(b.NS, map[string]string{
			"net/ipv4/conf/all/arp_ignore":                        "1",
			"net/ipv4/conf/all/arp_announce":                      "2",
			"net/ipv4/conf/" + BackendInterface + "/arp_ignore":   "1",
			"net/ipv4/conf/" + BackendInterface + "/arp_announce": "2",
			"net/ipv4/conf/all/rp_filter":                         "0",
			"net/ipv4/conf/" + BackendInterface + "/rp_filter":    "0",
		}); err != nil {
			return err
		}
		if b.MAC, err = linkMAC(b.NS, BackendInterface); err != nil {
			return err
		}
		routes = append(routes,
			fmt.Sprintf("route add %s/32 via %s", b.Tunnel4, b.Link4),
			fmt.Sprintf("route add %s/128 via %s", b.Tunnel6, b.Link6))
	}
	return batch(l.Router, routes)
}

func (l *Lab) startServers() error {
	for _, b := range l.Backends {
		if err := b.start(); err != nil {
			return fmt.Errorf("backend %d: %w", b.Index, err)
		}
	}
	return nil
}

// pfx formats a with the prefix length of p ("198.18.0.2/24").
func pfx(a netip.Addr, p netip.Prefix) string {
	return netip.PrefixFrom(a, p.Bits()).String()
}

// batch runs ip(8) commands in ns in one process (ip -batch), which keeps
// Up fast with hundreds of client addresses.
func batch(ns *netns.NS, cmds []string) error {
	cmd := ns.Command("ip", "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("in netns %s: ip -batch: %w: %s", ns.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// sysctls writes /proc/sys/<key> = value inside ns.
func sysctls(ns *netns.NS, kv map[string]string) error {
	return ns.Do(func() error {
		for k, v := range kv {
			if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0); err != nil {
				return fmt.Errorf("sysctl %s=%s in %s: %w", k, v, ns.Name, err)
			}
		}
		return nil
	})
}

func linkMAC(ns *netns.NS, name string) (net.HardwareAddr, error) {
	var mac net.HardwareAddr
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return fmt.Errorf("interface %s in %s: %w", name, ns.Name, err)
		}
		mac = ifi.HardwareAddr
		return nil
	})
	return mac, err
}
