package daemon

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/neigh"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/ring/xsk"
)

// probe is the last health verdict of one (rule, backend).
type probe struct {
	health      failover.Health
	weight      uint32
	weightState failover.WeightState
	lastError   string
	since       time.Time
}

type probeKey struct {
	rule string
	addr netip.Addr
}

// ruleRuntime is what the control plane remembers of one rule between
// computations.
type ruleRuntime struct {
	slot    uint16
	prev    *failover.State
	removed map[netip.Addr]removedBackend // gone from the configuration, still draining
}

type removedBackend struct {
	at    time.Time
	group string
}

func policyOf(r *config.Rule) failover.Policy {
	p := failover.Policy{
		WeightedMaglev:            r.LocalityLBPolicy == config.WeightedMaglev,
		FailoverRatio:             r.Failover.Ratio,
		DropTrafficIfUnhealthy:    r.Failover.DropTrafficIfUnhealthy,
		ConnectionDrainOnFailover: r.Failover.ConnectionDrainOnFailover,
		FailoverDrainTimeout:      r.Failover.FailoverDrainTimeout,
		FailbackDelay:             r.Failover.FailbackDelay,
		ConnectionDrainingTimeout: r.ConnectionDrainingTimeout,
		AutoCapacityDrain:         r.AutoCapacityDrain,
	}
	p.Zonal.Mode = failover.ZonalMode(r.ZonalAffinity.Mode)
	p.Zonal.SpilloverRatio = r.ZonalAffinity.SpilloverRatio
	for _, c := range r.ZonalAffinity.Clients {
		p.Zonal.Clients = append(p.Zonal.Clients, failover.ClientZone{Prefix: c.Prefix, Zone: c.Zone})
	}
	return p
}

// groupName is the failover group of a backend: its config group, or a
// group of its own role when the CLI marked it with another role than its
// group's (failover models roles per group; the CLI marks backends).
func groupName(b *config.BackendView, groupRole config.Role) string {
	if b.Role == groupRole {
		return b.Group
	}
	return b.Group + "~" + b.Role.String()
}

// failoverInput turns a rule's effective view, the health verdicts and
// the next-hop state into the eligible-set engine's input.
func (d *Daemon) failoverInput(rv *config.RuleView, rt *ruleRuntime) ([]failover.Group, []failover.Backend) {
	r := rv.Rule
	var groups []failover.Group
	seen := map[string]bool{}
	addGroup := func(g failover.Group) {
		if !seen[g.Name] {
			seen[g.Name] = true
			groups = append(groups, g)
		}
	}
	roleOf := map[string]config.Role{}
	for _, g := range r.Groups {
		roleOf[g.Name] = g.Role
		addGroup(failover.Group{Name: g.Name, Role: failover.Role(g.Role), Zone: g.Zone, CapacityScaler: g.CapacityScaler, Preferred: g.Preferred})
	}
	var bs []failover.Backend
	present := map[netip.Addr]bool{}
	for i := range rv.Backends {
		b := &rv.Backends[i]
		present[b.Addr] = true
		gname := groupName(b, roleOf[b.Group])
		addGroup(failover.Group{Name: gname, Role: failover.Role(b.Role), Zone: b.Zone, CapacityScaler: b.CapacityScaler, Preferred: b.Preferred})
		fb := failover.Backend{
			Name:  b.Addr.String(),
			ID:    d.reg.backend(r.Name, b.Addr),
			Group: gname,
		}
		d.applyHealth(r, b.Addr, &fb)
		if b.HasWeight {
			fb.Weight, fb.WeightState = uint32(b.Weight), failover.WeightOK
		}
		if b.Drained {
			fb.Admin, fb.DrainedAt = failover.AdminDrained, b.DrainedAt
		}
		bs = append(bs, fb)
	}
	for addr, rb := range rt.removed {
		if present[addr] {
			delete(rt.removed, addr) // back in the configuration
			continue
		}
		g := rb.group
		if !seen[g] {
			g = "~removed"
			addGroup(failover.Group{Name: g, Role: failover.RolePrimary, CapacityScaler: 1})
		}
		bs = append(bs, failover.Backend{Name: addr.String(), ID: d.reg.backend(r.Name, addr), Group: g, Removed: true, RemovedAt: rb.at, Health: failover.HealthUnknown})
	}
	return groups, bs
}

// applyHealth sets the health of one backend: the prober's verdict (NONE:
// always healthy), or UNKNOWN while its next hop is unresolved, because a
// backend whose MAC is unknown cannot receive anything (DESIGN §2 neigh).
func (d *Daemon) applyHealth(r *config.Rule, addr netip.Addr, fb *failover.Backend) {
	if r.HealthCheck.Type == config.HealthNone {
		fb.Health, fb.Weight, fb.WeightState = failover.HealthHealthy, 0, failover.WeightMissing
	} else if p, ok := d.probes[probeKey{r.Name, addr}]; ok {
		fb.Health, fb.Weight, fb.WeightState = p.health, p.weight, p.weightState
	} else {
		fb.Health, fb.WeightState = failover.HealthUnknown, failover.WeightUnavailable
	}
	if nh, ok := d.nexthops[nhKey{addr, r.Encap.Type == config.EncapDirect}]; !ok || nh.err != nil {
		fb.Health = failover.HealthUnknown
	}
}

type nhKey struct {
	addr   netip.Addr
	direct bool
}

type nexthop struct {
	nh  neigh.NextHop
	err error
}

func protocolOf(p config.Protocol) dataplane.RuleProtocol {
	switch p {
	case config.ProtocolUDP:
		return dataplane.RuleUDP
	case config.ProtocolL3Default:
		return dataplane.RuleL3Default
	}
	return dataplane.RuleTCP
}

func matchOf(r *config.Rule) dataplane.RuleMatch {
	m := dataplane.RuleMatch{VIP: r.VIP.As16(), Protocol: protocolOf(r.Protocol), AllPorts: r.Ports.All || r.Protocol == config.ProtocolL3Default}
	for _, pr := range r.Ports.Ranges {
		m.Ports = append(m.Ports, dataplane.PortRange{Lo: pr.First, Hi: pr.Last})
	}
	return m
}

// vipsOf is the rule's part of the XDP program's VIP set.
func vipsOf(r *config.Rule) []xsk.VIP {
	switch {
	case r.Protocol == config.ProtocolL3Default:
		return []xsk.VIP{{Addr: r.VIP}}
	case r.Ports.All:
		return []xsk.VIP{{Addr: r.VIP, Proto: protoNumber(r.Protocol)}}
	}
	var out []xsk.VIP
	for _, pr := range r.Ports.Ranges {
		for p := int(pr.First); p <= int(pr.Last); p++ {
			out = append(out, xsk.VIP{Addr: r.VIP, Proto: protoNumber(r.Protocol), Port: uint16(p)})
		}
	}
	return out
}

func protoNumber(p config.Protocol) uint8 {
	if p == config.ProtocolUDP {
		return packet.ProtoUDP
	}
	return packet.ProtoTCP
}

func encapKind(t config.EncapType) encap.Kind {
	switch t {
	case config.EncapGUE:
		return encap.GUE
	case config.EncapGRE:
		return encap.GRE
	case config.EncapDirect:
		return encap.Direct
	}
	return encap.IPIP
}

// template builds the encapsulation towards one backend from its next hop.
func (d *Daemon) template(r *config.Rule, addr netip.Addr) (*encap.Template, error) {
	nhs, ok := d.nexthops[nhKey{addr, r.Encap.Type == config.EncapDirect}]
	if !ok || nhs.err != nil {
		return nil, fmt.Errorf("next hop of %s unresolved", addr)
	}
	nh := nhs.nh
	var src, dst [6]byte
	copy(src[:], nh.SrcMAC)
	copy(dst[:], nh.DstMAC)
	inner := packet.IPv4
	if r.VIP.Is6() && !r.VIP.Is4In6() {
		inner = packet.IPv6
	}
	return encap.NewTemplate(encap.Spec{
		Kind: encapKind(r.Encap.Type), SrcMAC: src, DstMAC: dst,
		Src: nh.Src, Dst: addr, Inner: inner, GUEPort: r.Encap.GUEPort, MTU: nh.MTU,
	})
}
