package k8s

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// rule is one rule file's content before rendering.
type rule struct {
	name, service, class string
	vip                  netip.Addr
	protocol             string
	ports                []int32
	clientIP             bool
	weighted, zonal      bool
	sourceRanges         []netip.Prefix // of the VIP's family; none: every client
	hcPort               int
	hcPath               string
	backends             []backend
}

// markerPrefix starts the line that makes a file the controller's: it
// rewrites and removes only files with this line (and its own class).
const markerPrefix = "# xlb-k8s: "

func marker(class, service string) string {
	return fmt.Sprintf("%sclass=%s service=%s", markerPrefix, class, service)
}

// parseMarker reads a file's marker line: its class and Service.
func parseMarker(content []byte) (class, service string, ok bool) {
	for i, line := range strings.SplitN(string(content), "\n", 4) {
		if i > 2 {
			break
		}
		rest, found := strings.CutPrefix(line, markerPrefix)
		if !found {
			continue
		}
		for _, f := range strings.Fields(rest) {
			if v, ok := strings.CutPrefix(f, "class="); ok {
				class = v
			} else if v, ok := strings.CutPrefix(f, "service="); ok {
				service = v
			}
		}
		return class, service, class != "" && service != ""
	}
	return "", "", false
}

// render writes a rule as TOML, the same bytes for the same rule on every
// appliance (nothing time- or host-dependent).
func (c *Controller) render(r rule) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by xlb k8s for Service %s: changes to this file are overwritten.\n", r.service)
	b.WriteString(marker(r.class, r.service) + "\n")
	fmt.Fprintf(&b, "name = %s\n", tomlString(r.name))
	fmt.Fprintf(&b, "vip = %s\n", tomlString(r.vip.String()))
	fmt.Fprintf(&b, "protocol = %s\n", tomlString(r.protocol))
	ports := slices.Clone(r.ports)
	slices.Sort(ports)
	ports = slices.Compact(ports)
	var ps []string
	for _, p := range ports {
		ps = append(ps, strconv.Quote(strconv.Itoa(int(p))))
	}
	fmt.Fprintf(&b, "ports = [%s]\n", strings.Join(ps, ", "))
	affinity := "NONE"
	if r.clientIP {
		affinity = "CLIENT_IP"
	}
	fmt.Fprintf(&b, "session_affinity = %s\n", tomlString(affinity))
	if len(r.sourceRanges) > 0 {
		b.WriteString("# spec.loadBalancerSourceRanges: only these clients reach the VIP.\nsource_ranges = [\n")
		for _, p := range r.sourceRanges {
			fmt.Fprintf(&b, "  %s,\n", tomlString(p.String()))
		}
		b.WriteString("]\n")
	}
	if r.weighted {
		b.WriteString("# Static weights: each node's ready, serving, non-terminating endpoints.\n")
		b.WriteString("locality_lb_policy = \"WEIGHTED_MAGLEV\"\n")
	}
	fmt.Fprintf(&b, "connection_draining_timeout = %s\n", tomlString(duration(c.opts.DrainingTimeout)))

	hc := c.opts.HealthCheck
	b.WriteString("\n[health_check]\ntype = \"HTTP\"\n")
	// kube-proxy answers on the node's own addresses: the VIP is no local
	// address of a node, so a probe through the data path would fail.
	b.WriteString("path = \"DIRECT\"\n")
	fmt.Fprintf(&b, "port = %d\nrequest_path = %s\n", r.hcPort, tomlString(r.hcPath))
	fmt.Fprintf(&b, "interval = %s\ntimeout = %s\n", tomlString(duration(hc.Interval)), tomlString(duration(hc.Timeout)))
	fmt.Fprintf(&b, "healthy_threshold = %d\nunhealthy_threshold = %d\n", hc.HealthyThreshold, hc.Unhealthy)

	fmt.Fprintf(&b, "\n[encap]\ntype = %s\n", tomlString(c.opts.Encap))
	if c.opts.Encap == "GUE" && c.opts.GUEPort != 0 {
		fmt.Fprintf(&b, "gue_port = %d\n", c.opts.GUEPort)
	}

	if r.zonal {
		b.WriteString("\n[zonal_affinity]\nmode = \"ZONAL_AFFINITY_SPILL_CROSS_ZONE\"\nspillover_ratio = 0.0\n")
		b.WriteString("\n[zonal_affinity.clients]\n")
		zones := make([]string, 0, len(c.opts.ClientZones))
		for z := range c.opts.ClientZones {
			zones = append(zones, z)
		}
		slices.Sort(zones)
		for _, z := range zones {
			var pfx []string
			for _, p := range c.opts.ClientZones[z] {
				pfx = append(pfx, tomlString(p.String()))
			}
			fmt.Fprintf(&b, "%s = [%s]\n", tomlString(z), strings.Join(pfx, ", "))
		}
	}

	// One group per zone, in zone order; nodes without a zone together.
	byZone := map[string][]backend{}
	for _, be := range r.backends {
		byZone[be.zone] = append(byZone[be.zone], be)
	}
	zones := make([]string, 0, len(byZone))
	for z := range byZone {
		zones = append(zones, z)
	}
	slices.Sort(zones)
	for _, z := range zones {
		name := z
		if z == "" {
			name = "nodes"
		}
		fmt.Fprintf(&b, "\n[[group]]\nname = %s\n", tomlString(name))
		if z != "" {
			fmt.Fprintf(&b, "zone = %s\n", tomlString(z))
		}
		b.WriteString("backends = [\n")
		for _, be := range byZone[z] {
			if r.weighted {
				fmt.Fprintf(&b, "  {address = %s, weight = %d}, # %s\n", tomlString(be.addr.String()), be.weight, be.node)
			} else {
				fmt.Fprintf(&b, "  %s, # %s\n", tomlString(be.addr.String()), be.node)
			}
		}
		b.WriteString("]\n")
	}
	return b.Bytes()
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// duration writes d as xlb's duration strings ("8s", "1m30s", "500ms").
func duration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	return d.String()
}
