package lab

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Rule is one forwarding rule of a lab configuration for xlb.
type Rule struct {
	Name     string
	VIP      netip.Addr
	Protocol string // TCP, UDP or L3_DEFAULT
	Ports    string // TOML value: `["80"]` or `"ALL"`
	Encap    string // IPIP, GUE, GRE or DIRECT
	// Extra is more TOML for the rule: top-level keys first, then tables.
	Extra string
	// Health is the body of [health_check]; "" means HTTP GET /healthz on
	// HealthPort every second, healthy after 1 success, unhealthy after 2
	// failures.
	Health string
	// Backends are the indexes of the lab backends the rule lists; nil
	// means all. Their tunnel addresses (link addresses for DIRECT) of the
	// VIP's family are used.
	Backends []int
	// Groups, when set, replace the one group "lab" of Backends: failover
	// groups, zones, capacity scalers, preferred groups.
	Groups []Group
}

// Group is one [[group]] of a lab rule.
type Group struct {
	Name     string
	Backends []int // lab backend indexes, addressed as for Rule.Backends
	// Extra is more keys of the group: `role = "failover"`, `zone = "a"`,
	// `capacity_scaler = 0.5`, `preferred = true`, one per line.
	Extra string
}

// DefaultRules are the rules `xlb lab` runs with: for each VIP a TCP rule
// for the HTTP port and a fragment-safe UDP rule (all ports, CLIENT_IP,
// PER_SESSION), all with encapsulation encap: web4, web6, udp4, udp6.
func (l *Lab) DefaultRules(encap string) []Rule {
	encap = strings.ToUpper(encap)
	udp := "session_affinity = \"CLIENT_IP\"\n[connection_tracking]\ntracking_mode = \"PER_SESSION\"\n"
	http := fmt.Sprintf(`["%d"]`, l.Opts.HTTPPort)
	return []Rule{
		{Name: "web4", VIP: l.Opts.VIP4, Protocol: "TCP", Ports: http, Encap: encap},
		{Name: "web6", VIP: l.Opts.VIP6, Protocol: "TCP", Ports: http, Encap: encap},
		{Name: "udp4", VIP: l.Opts.VIP4, Protocol: "UDP", Ports: `"ALL"`, Encap: encap, Extra: udp},
		{Name: "udp6", VIP: l.Opts.VIP6, Protocol: "UDP", Ports: `"ALL"`, Encap: encap, Extra: udp},
	}
}

// WriteConfig writes an xlb configuration for this lab into dir
// (docs/design.md#configuration): dir/xlb.toml for the appliance on
// XLBInterface, with its state file and control socket inside dir and no
// metrics listener, and one file per rule in dir/rules.d. It returns the path
// of xlb.toml. Writing again replaces the files (for reload tests). With
// Options.BGP the appliance announces its VIPs to the router (BGPConfig).
func (l *Lab) WriteConfig(dir string, rules []Rule) (string, error) {
	if err := os.MkdirAll(filepath.Join(dir, "rules.d"), 0o755); err != nil {
		return "", fmt.Errorf("write lab config: %w", err)
	}
	main := fmt.Sprintf(`# xlb on the lab %q (written by pkg/lab)
interface = %q
queues = "all"
hash_seed = "0x1ab5eed"
rules_dir = "rules.d"
state_file = %q
control_socket = %q
metrics_listen = "127.0.0.1:9641" # loopback of the xlb namespace: no clash between labs
worker_nice = -10 # the lab's CPUs also run its clients, backends and router
[conntrack]
max_entries = 262144
`, l.Opts.Prefix, XLBInterface, filepath.Join(dir, "state.toml"), filepath.Join(dir, "xlb.sock"))
	if l.Opts.XLBPinDir != "" {
		// A top-level key: before the [conntrack] table.
		main = strings.Replace(main, "[conntrack]\n", fmt.Sprintf("pin_dir = %q\n[conntrack]\n", l.Opts.XLBPinDir), 1)
	}
	if l.Opts.XLBConfig != "" {
		main = strings.Replace(main, "[conntrack]\n", strings.TrimSuffix(l.Opts.XLBConfig, "\n")+"\n[conntrack]\n", 1)
	}
	if l.Opts.BGP {
		main += l.BGPConfig()
	}
	path := filepath.Join(dir, "xlb.toml")
	if err := os.WriteFile(path, []byte(main), 0o644); err != nil {
		return "", fmt.Errorf("write lab config: %w", err)
	}
	for _, r := range rules {
		text, err := l.ruleText(r)
		if err != nil {
			return "", fmt.Errorf("write lab config: rule %s: %w", r.Name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "rules.d", r.Name+".toml"), []byte(text), 0o644); err != nil {
			return "", fmt.Errorf("write lab config: %w", err)
		}
	}
	return path, nil
}

// WriteConfigOn is WriteConfig for appliance a of a fleet: with
// Options.Fleet it adds a's [fleet] table (FleetConfig) and writes the
// lab's key file beside xlb.toml.
func (l *Lab) WriteConfigOn(a *Appliance, dir string, rules []Rule) (string, error) {
	path, err := l.WriteConfig(dir, rules)
	if err != nil || !l.Opts.Fleet {
		return path, err
	}
	key := filepath.Join(dir, "fleet.key")
	if err := os.WriteFile(key, []byte(FleetKey+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write lab config: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return "", fmt.Errorf("write lab config: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(l.FleetConfig(a, "fleet.key")); err != nil {
		return "", fmt.Errorf("write lab config: %w", err)
	}
	return path, nil
}

// FleetKey is the lab's fleet key (a lab is a test bed: its key is no
// secret).
const FleetKey = "eGxiLWxhYi1mbGVldC1rZXktbm90LWEtc2VjcmV0LTAwMDA="

// FleetConfig is appliance a's [fleet] table: its fabric address, every
// appliance of the lab as a peer (the appliances reach each other over the
// bridge; the XDP program passes what is not for a VIP to the kernel), a
// join timeout short enough for tests that start appliances one by one.
func (l *Lab) FleetConfig(a *Appliance, keyFile string) string {
	var peers []string
	for _, p := range l.Appliances {
		peers = append(peers, strconv.Quote(p.Addr4.String()))
	}
	return fmt.Sprintf(`[fleet]
address = %q
peers = [%s]
key_file = %q
join_timeout = "3s"
refresh = "5s"
`, a.Addr4, strings.Join(peers, ", "), keyFile)
}

// BGPHoldTime is the BGP hold time of the lab's router and appliances:
// 3 s, so a silent appliance leaves ECMP within the tests' patience; 9 s
// with Options.BFD, where BFD detects a silent appliance in 0.3 s and the
// hold timer is only its backstop: at 3 s a 2-CPU machine under heavy load
// starved BIRD or the speaker past it while BFD stayed Up
// (docs/design.md#bfd).
func (l *Lab) BGPHoldTime() time.Duration {
	if l.Opts.BFD {
		return 9 * time.Second
	}
	return 3 * time.Second
}

// BGPConfig is the [bgp] table of every appliance of a BGP lab: AS
// ApplianceAS, eBGP to the router's IPv4 and IPv6 addresses, the router's
// hold time, no withdraw delay beyond a short one (tests stop appliances
// often). The router id defaults to the appliance's own address. With
// Options.BFD every peer runs BFD with the default timers.
func (l *Lab) BGPConfig() string {
	gr := ""
	if l.Opts.XLBGracefulRestart > 0 {
		gr = fmt.Sprintf("graceful_restart = %q\n", l.Opts.XLBGracefulRestart.String())
	}
	bfd := ""
	if l.Opts.BFD {
		bfd = "bfd = true\n"
	}
	return fmt.Sprintf(`[bgp]
local_as = %d
hold_time = %q
withdraw_delay = "1s"
%s[[bgp.peer]]
address = %q
peer_as = %d
%s[[bgp.peer]]
address = %q
peer_as = %d
%s`, ApplianceAS, l.BGPHoldTime().String(), gr, l.Gateway4, RouterAS, bfd, l.Gateway6, RouterAS, bfd)
}

func (l *Lab) ruleText(r Rule) (string, error) {
	switch r.Encap {
	case "IPIP", "GUE", "GRE", "DIRECT":
	default:
		return "", fmt.Errorf("encapsulation %q, want IPIP, GUE, GRE or DIRECT", r.Encap)
	}
	v4, v6 := l.BackendAddrs(r.Encap == "DIRECT")
	all := v4
	if r.VIP.Is6() && !r.VIP.Is4In6() {
		all = v6
	}
	list := func(idx []int) (string, error) {
		var quoted []string
		for _, i := range idx {
			if i < 0 || i >= len(all) {
				return "", fmt.Errorf("backend %d of %d", i, len(all))
			}
			quoted = append(quoted, fmt.Sprintf("%q", all[i].String()))
		}
		return strings.Join(quoted, ", "), nil
	}
	groups := r.Groups
	if groups == nil {
		idx := r.Backends
		if idx == nil {
			for i := range all {
				idx = append(idx, i)
			}
		}
		groups = []Group{{Name: "lab", Backends: idx}}
	}
	var gtext strings.Builder
	for _, g := range groups {
		backends, err := list(g.Backends)
		if err != nil {
			return "", fmt.Errorf("group %s: %w", g.Name, err)
		}
		fmt.Fprintf(&gtext, "[[group]]\nname = %q\n%sbackends = [%s]\n\n", g.Name, g.Extra, backends)
	}
	health := r.Health
	if health == "" {
		health = fmt.Sprintf("type = \"HTTP\"\nport = %d\nrequest_path = \"/healthz\"\ninterval = \"1s\"\ntimeout = \"1s\"\nhealthy_threshold = 1\nunhealthy_threshold = 2\n", l.Opts.HealthPort)
	}
	// Extra's top-level keys must come before any table: the tables start
	// at the first line that opens one (a key's value may hold brackets).
	top, tables := r.Extra, ""
	if strings.HasPrefix(top, "[") {
		top, tables = "", top
	} else if i := strings.Index(top, "\n["); i >= 0 {
		top, tables = top[:i+1], top[i+1:]
	}
	return fmt.Sprintf("name = %q\nvip = %q\nprotocol = %q\nports = %s\n%s\n[encap]\ntype = %q\ngue_port = %d\n\n[health_check]\n%s\n%s%s",
		r.Name, r.VIP.String(), r.Protocol, r.Ports, top, r.Encap, l.Opts.GUEPort, health, gtext.String(), tables), nil
}

// Describe prints what the lab is: namespaces, addresses, VIPs and how to
// reach it, for `xlb lab up`.
func (l *Lab) Describe(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	o := l.Opts
	fmt.Fprintf(tw, "lab\t%s (namespaces %s*)\n", strings.TrimSuffix(o.Prefix, "-"), o.Prefix)
	fmt.Fprintf(tw, "VIPs\t%s, %s (HTTP :%d, UDP echo :%d)\n", o.VIP4, o.VIP6, o.HTTPPort, o.UDPPort)
	fmt.Fprintf(tw, "client\t%s: %d addresses per family, %s … %s, %s … %s, MTU %d\n", l.Client.Name, len(l.ClientAddrs4),
		l.ClientAddrs4[0], l.ClientAddrs4[len(l.ClientAddrs4)-1], l.ClientAddrs6[0], l.ClientAddrs6[len(l.ClientAddrs6)-1], o.ClientMTU)
	fmt.Fprintf(tw, "router\t%s: gateway %s, %s (%s), MTU %d\n", l.Router.Name, l.Gateway4, l.Gateway6, l.GatewayMAC, o.FabricMTU)
	for _, a := range l.Appliances {
		fmt.Fprintf(tw, "appliance\t%s: %s %s, %s (%s), %d queues, router port %s\n", a.NS.Name, XLBInterface, a.Addr4, a.Addr6, a.MAC, o.Queues, a.RouterLink)
	}
	if o.BGP && l.frr != nil {
		fmt.Fprintf(tw, "bgp\tFRR (zebra, bgpd) in %s, AS %d, eBGP to each appliance (AS %d) over IPv4 and IPv6; multipath hash policy 3, fields 0x37\n", l.Router.Name, RouterAS, ApplianceAS)
		fmt.Fprintf(tw, "\tvtysh --vty_socket %s -c 'show bgp summary'; ip netns exec %s ip route show %s\n", l.frr.dir, l.Router.Name, o.VIP4)
	} else if o.BGP {
		fmt.Fprintf(tw, "bgp\tBIRD 2 in %s, AS %d, eBGP to each appliance (AS %d) over IPv4 and IPv6; multipath hash policy 3, fields 0x37\n", l.Router.Name, RouterAS, ApplianceAS)
		fmt.Fprintf(tw, "\tbirdc -s %s show protocols; ip netns exec %s ip route show %s\n", l.bird.socket(), l.Router.Name, o.VIP4)
	}
	for _, b := range l.Backends {
		decap := "decap"
		if o.NoDecap {
			decap = "no decap"
		}
		fmt.Fprintf(tw, "backend\t%s: link %s %s (%s), tunnel %s %s, %s\n", b.NS.Name, b.Link4, b.Link6, b.MAC, b.Tunnel4, b.Tunnel6, decap)
	}
	fmt.Fprintf(tw, "try\tip netns exec %s curl http://%s/\n", l.Client.Name, netip.AddrPortFrom(o.VIP4, o.HTTPPort))
	return tw.Flush()
}
