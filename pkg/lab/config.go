package lab

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// ConfigOptions choose what WriteConfig writes.
type ConfigOptions struct {
	// Encap is IPIP, GUE, GRE or DIRECT (default IPIP).
	Encap string
	// XDPMode is auto, native or generic (default auto).
	XDPMode string
}

// WriteConfig writes an xlb configuration for this lab into dir (DESIGN
// §4): dir/xlb.toml for the appliance on XLBInterface, with its control
// socket, state file and metrics kept inside dir, and four rules in
// dir/rules.d, for each VIP a TCP rule for the HTTP port and a
// fragment-safe UDP rule (all ports, CLIENT_IP_PROTO, PER_SESSION), with
// the backends' tunnel addresses (link addresses for DIRECT) and HTTP
// health checks of /healthz on HealthPort. It returns the path of
// xlb.toml.
func (l *Lab) WriteConfig(dir string, c ConfigOptions) (string, error) {
	encap := strings.ToUpper(c.Encap)
	if encap == "" {
		encap = "IPIP"
	}
	switch encap {
	case "IPIP", "GUE", "GRE", "DIRECT":
	default:
		return "", fmt.Errorf("write lab config: encapsulation %q, want IPIP, GUE, GRE or DIRECT", c.Encap)
	}
	xdp := c.XDPMode
	if xdp == "" {
		xdp = "auto"
	}
	rules := filepath.Join(dir, "rules.d")
	if err := os.MkdirAll(rules, 0o755); err != nil {
		return "", fmt.Errorf("write lab config: %w", err)
	}
	main := fmt.Sprintf(`# xlb on the lab %q (written by pkg/lab).
interface = %q
queues = "all"
xdp_mode = %q
hash_seed = "0x1ab5eed"
rules_dir = "rules.d"
state_file = %q
control_socket = %q
metrics_listen = "127.0.0.1:9641" # inside the xlb namespace: no clash between labs
`, l.Opts.Prefix, XLBInterface, xdp, filepath.Join(dir, "state.toml"), filepath.Join(dir, "xlb.sock"))
	files := map[string]string{filepath.Join(dir, "xlb.toml"): main}
	v4, v6 := l.BackendAddrs(encap == "DIRECT")
	for _, r := range []struct {
		name     string
		vip      netip.Addr
		backends []netip.Addr
	}{{"4", l.Opts.VIP4, v4}, {"6", l.Opts.VIP6, v6}} {
		files[filepath.Join(rules, "web"+r.name+".toml")] = l.rule("web"+r.name, r.vip, "TCP", fmt.Sprintf("[%q]", fmt.Sprint(l.Opts.HTTPPort)), "", encap, r.backends)
		files[filepath.Join(rules, "udp"+r.name+".toml")] = l.rule("udp"+r.name, r.vip, "UDP", `"ALL"`,
			"session_affinity = \"CLIENT_IP_PROTO\"\n\n[connection_tracking]\ntracking_mode = \"PER_SESSION\"\n", encap, r.backends)
	}
	for path, body := range files {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return "", fmt.Errorf("write lab config: %w", err)
		}
	}
	return filepath.Join(dir, "xlb.toml"), nil
}

func (l *Lab) rule(name string, vip netip.Addr, proto, ports, extra, encap string, backends []netip.Addr) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name = %q\nvip = %q\nprotocol = %q\nports = %s\n", name, vip, proto, ports)
	if extra != "" {
		b.WriteString(extra)
	}
	fmt.Fprintf(&b, "\n[health_check]\ntype = \"HTTP\"\nport = %d\nrequest_path = \"/healthz\"\ninterval = \"1s\"\ntimeout = \"1s\"\n", l.Opts.HealthPort)
	fmt.Fprintf(&b, "\n[encap]\ntype = %q\n", encap)
	if encap == "GUE" {
		fmt.Fprintf(&b, "gue_port = %d\n", l.Opts.GUEPort)
	}
	quoted := make([]string, len(backends))
	for i, a := range backends {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	fmt.Fprintf(&b, "\n[[group]]\nname = \"lab\"\nbackends = [%s]\n", strings.Join(quoted, ", "))
	return b.String()
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
	fmt.Fprintf(tw, "appliance\t%s: %s %s, %s (%s), %d queues\n", l.XLB.Name, XLBInterface, l.XLBAddr4, l.XLBAddr6, l.XLBMAC, o.Queues)
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
