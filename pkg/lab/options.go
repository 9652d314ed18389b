package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Defaults.
const (
	DefaultPrefix      = "xlb-"
	DefaultBackends    = 3
	DefaultQueues      = 2
	DefaultClientAddrs = 200
	DefaultFabricMTU   = 3500
	DefaultClientMTU   = 1500
	DefaultHTTPPort    = 80
	DefaultUDPPort     = 7
	DefaultHealthPort  = 8080
	DefaultGUEPort     = 6080

	// MaxBackends keeps backend addresses inside .100–.249 of their /24.
	MaxBackends = 150
	// MaxAppliances keeps appliance addresses (.2 + i) below the backends'
	// and within BIRD's merge limit of 16 paths.
	MaxAppliances = 16
	// MaxClientAddrs bounds the client's source addresses per family: the
	// first 253 fill 198.51.100.0/24 after the router's .1, the rest are
	// /32s from ClientExtraNet4.
	MaxClientAddrs = 1000
	// clientLinkAddrs is how many client addresses fit on the client link.
	clientLinkAddrs = 253
)

// Address plan (see doc.go for the drawing).
var (
	ClientNet4 = netip.MustParsePrefix("198.51.100.0/24") // client ↔ router link
	ClientNet6 = netip.MustParsePrefix("fd00:51::/64")
	// ClientExtraNet4 holds the client's IPv4 addresses beyond the 253 of
	// ClientNet4 (routed by the router via the client's first address).
	ClientExtraNet4 = netip.MustParsePrefix("198.19.0.0/16")
	FabricNet4      = netip.MustParsePrefix("198.18.0.0/24") // the bridge in the router namespace
	FabricNet6      = netip.MustParsePrefix("fd00:18::/64")
	TunnelNet4      = netip.MustParsePrefix("198.18.1.0/24") // backends' tunnel addresses on lo, routed by the router
	TunnelNet6      = netip.MustParsePrefix("fd00:18:1::/64")

	DefaultVIP4 = netip.MustParseAddr("203.0.113.10")
	DefaultVIP6 = netip.MustParseAddr("fd00:203:113::10")
)

// Host numbers inside the plan's prefixes.
const (
	hostRouter      = 1   // router on the client link and on the fabric
	hostXLB         = 2   // the appliance on the fabric
	hostFirstClient = 2   // first client address on the client link
	hostFirstBE4    = 100 // backend i is .100+i (IPv4)
	hostFirstBE6    = 0x100
)

// Options configure a lab. The zero value is the default lab.
type Options struct {
	// Prefix starts the name of every namespace the lab creates (default
	// "xlb-"); parallel labs need different prefixes.
	Prefix string
	// Backends is the number of backends (default 3, at most 150).
	Backends int
	// Appliances is the number of appliance namespaces (default 1, at most
	// 16): Prefix+"xlb", then Prefix+"xlb1", "xlb2"…. More than one implies
	// BGP.
	Appliances int
	// BGP runs BIRD 2 in the router: eBGP (AS 65000) to every appliance
	// (AS 65001) over IPv4 and IPv6, one multipath kernel route per VIP
	// with a 5-tuple hash (fleet.go). Without it the router routes the VIPs
	// to the first appliance statically.
	BGP bool
	// Router is the router's BGP daemon: RouterBIRD (the default) or
	// RouterFRR (zebra and bgpd with FRRConfig; implies BGP).
	Router string
	// BFD runs BFD (100 ms × 3; the router's multiplier 10) between the
	// router and every appliance: BIRD gets `bfd on` and a protocol bfd
	// (BIRDConfig), the xlb configuration WriteConfig writes `bfd = true`
	// on each peer. BIRD only (implies BGP); the lab's FRR runs no bfdd.
	BFD bool
	// Queues is the number of RX and TX queues of the appliance's veth
	// (default 2).
	Queues int
	// ClientAddrs is the number of source addresses per family in the
	// client namespace (default 200, at most 253).
	ClientAddrs int
	// FabricMTU is the MTU between router, appliance and backends (default
	// 3500: the largest with which a veth runs native XDP without XDP
	// multi-buffer support, so the appliance gets native mode and every
	// queue; 9000, as inside a data centre, makes it fall back to generic
	// mode); ClientMTU the client's link (1500).
	FabricMTU, ClientMTU int
	// VIP4 and VIP6 are the VIPs (defaults 203.0.113.10, fd00:203:113::10).
	VIP4, VIP6 netip.Addr
	// ExtraVIPs4 is an IPv4 prefix whose host routes the router's BIRD
	// accepts beside VIP4's /24 (a test announcing more VIPs than a /24
	// holds); unset: none.
	ExtraVIPs4 netip.Prefix
	// HTTPPort (80), UDPPort (7, echo) and HealthPort (8080) are the
	// backends' server ports; GUEPort (6080) is where decap listens.
	HTTPPort, UDPPort, HealthPort, GUEPort uint16
	// KeepOffloads leaves checksum offload, TSO and GSO on for the router's
	// link to the appliance (by default they are off, so the appliance
	// receives complete checksums and MTU-sized frames).
	KeepOffloads bool
	// NoDecap skips running pkg/decap on the backends (DIRECT-only labs).
	NoDecap bool
	// TCPRTOMax caps TCP's retransmission timeout in the client's and the
	// backends' namespaces (net.ipv4.tcp_rto_max_ms, Linux 6.15+; at least
	// 1 s; 0 keeps the kernel's 120 s). A test that floods the lab loses
	// most packets for the flood's length, and TCP's exponential backoff
	// would then wait about as long again before its next try; with the
	// cap, a connection answers within one cap of the flood's end. The
	// kernel still gives up after tcp_retries2 (15) retransmissions in a
	// row, which the cap shortens to about 11 caps plus 3 s: a 1 s cap
	// kills a connection that lost everything for 16 s. The cap is set
	// before the servers listen, since an accepted socket takes its
	// listener's.
	TCPRTOMax time.Duration
	// XLBPinDir is pin_dir of the configuration WriteConfig writes (""
	// leaves xlb's default). A bpf filesystem mounted outside /sys is seen
	// by every `ip netns exec`, which mounts a /sys of its own.
	XLBPinDir string
	// XLBConfig is top-level lines WriteConfig adds to xlb.toml (e.g.
	// `busy_poll = "50us"`), before its first table.
	XLBConfig string
	// XLBGracefulRestart is [bgp] graceful_restart of that configuration
	// (0 leaves it out: xlb's default, none).
	XLBGracefulRestart time.Duration
	// Fleet adds [fleet] to each appliance's configuration (WriteConfigOn):
	// the appliances share their exceptions over the fabric, every
	// appliance of the lab a peer, with a key file of the lab's.
	Fleet bool
	// Logf, if set, receives one line per setup step.
	Logf func(format string, args ...any)
}

func (o *Options) setDefaults() error {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(o.Prefix, "/ \t\n") || len(o.Prefix) > 40 {
		return fmt.Errorf("prefix %q: want at most 40 characters, no slash or space", o.Prefix)
	}
	for _, c := range []struct {
		name     string
		v        *int
		def, max int
	}{
		{"backends", &o.Backends, DefaultBackends, MaxBackends},
		{"appliances", &o.Appliances, 1, MaxAppliances},
		{"queues", &o.Queues, DefaultQueues, 256},
		{"client addresses", &o.ClientAddrs, DefaultClientAddrs, MaxClientAddrs},
	} {
		if *c.v == 0 {
			*c.v = c.def
		}
		if *c.v < 1 || *c.v > c.max {
			return fmt.Errorf("%s %d outside 1..%d", c.name, *c.v, c.max)
		}
	}
	if o.TCPRTOMax != 0 && o.TCPRTOMax < time.Second {
		return fmt.Errorf("TCP retransmission timeout cap %v: want at least 1s (the kernel's floor)", o.TCPRTOMax)
	}
	switch o.Router {
	case "":
		o.Router = RouterBIRD
	case RouterBIRD:
	case RouterFRR:
		o.BGP = true
	default:
		return fmt.Errorf("router %q: want %s or %s", o.Router, RouterBIRD, RouterFRR)
	}
	if o.Appliances > 1 || o.BFD {
		o.BGP = true
	}
	if o.BFD && o.Router == RouterFRR {
		return errors.New("bfd: the lab's FRR router runs no bfdd; BFD needs the BIRD router")
	}
	if o.FabricMTU == 0 {
		o.FabricMTU = DefaultFabricMTU
	}
	if o.ClientMTU == 0 {
		o.ClientMTU = DefaultClientMTU
	}
	for _, m := range []int{o.FabricMTU, o.ClientMTU} {
		if m < 1280 || m > 65535 {
			return fmt.Errorf("mtu %d outside 1280..65535 (IPv6 needs 1280)", m)
		}
	}
	if !o.VIP4.IsValid() {
		o.VIP4 = DefaultVIP4
	}
	if !o.VIP6.IsValid() {
		o.VIP6 = DefaultVIP6
	}
	if !o.VIP4.Is4() || !o.VIP6.Is6() || o.VIP6.Is4In6() {
		return errors.New("vip4 must be IPv4 and vip6 IPv6")
	}
	for _, p := range []netip.Prefix{ClientNet4, ClientNet6, FabricNet4, FabricNet6, TunnelNet4, TunnelNet6} {
		if p.Contains(o.VIP4) || p.Contains(o.VIP6) {
			return fmt.Errorf("vip inside the lab's own %v", p)
		}
	}
	if o.HTTPPort == 0 {
		o.HTTPPort = DefaultHTTPPort
	}
	if o.UDPPort == 0 {
		o.UDPPort = DefaultUDPPort
	}
	if o.HealthPort == 0 {
		o.HealthPort = DefaultHealthPort
	}
	if o.GUEPort == 0 {
		o.GUEPort = DefaultGUEPort
	}
	if o.HTTPPort == o.HealthPort {
		return fmt.Errorf("http and health port are both %d", o.HTTPPort)
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

// host returns the address n inside p (n counted from the prefix start).
func host(p netip.Prefix, n int) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := len(b) - 1; i >= 0 && n > 0; i-- {
		s := int(b[i]) + n
		b[i] = byte(s)
		n = s >> 8
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
