package daemon

import (
	"slices"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/engine"
)

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
	p.Zonal.Mode = zonalModes.of(r.ZonalAffinity.Mode)
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

// failoverInput turns a rule's effective view into the eligible-set
// engine's input: the rule's groups, plus a group of its own for each
// backend the CLI marked with another role than its group's, and one
// backend per address with its static or CLI weight and its drain. known
// first fills in what the caller knows of a backend (slot, health, the
// health check's weight); a static or CLI weight then overrides the
// check's. The running daemon (ruleInput) and Simulate (baseInput) both
// build their input here.
func failoverInput(rv *config.RuleView, known func(b *config.BackendView, fb *failover.Backend)) ([]failover.Group, []failover.Backend) {
	var groups []failover.Group
	seen := map[string]bool{}
	addGroup := func(g failover.Group) {
		if !seen[g.Name] {
			seen[g.Name] = true
			groups = append(groups, g)
		}
	}
	roleOf := map[string]config.Role{}
	for _, g := range rv.Rule.Groups {
		roleOf[g.Name] = g.Role
		addGroup(failover.Group{Name: g.Name, Role: roles.of(g.Role), Zone: g.Zone, CapacityScaler: g.CapacityScaler, Preferred: g.Preferred})
	}
	bs := make([]failover.Backend, 0, len(rv.Backends))
	for i := range rv.Backends {
		b := &rv.Backends[i]
		gname := groupName(b, roleOf[b.Group])
		addGroup(failover.Group{Name: gname, Role: roles.of(b.Role), Zone: b.Zone, CapacityScaler: b.CapacityScaler, Preferred: b.Preferred})
		fb := failover.Backend{Name: b.Addr.String(), Group: gname}
		known(b, &fb)
		if b.HasWeight {
			fb.Weight, fb.WeightState = uint32(b.Weight), failover.WeightOK
		}
		if b.Drained {
			fb.Admin, fb.DrainedAt = failover.AdminDrained, b.DrainedAt
		}
		bs = append(bs, fb)
	}
	return groups, bs
}

// ruleInput is failoverInput for the running daemon: backend slots from
// the registry, health from the probes and next hops, and the backends a
// reload removed while they drain. A rule that is not warm yet gets its
// start-up input (warmup.go: no verdict counts until every backend has
// one), so it stays on its start-up set and switches once.
func (d *daemon) ruleInput(rv *config.RuleView, rt *ruleRuntime, warm bool) ([]failover.Group, []failover.Backend) {
	r := rv.Rule
	groups, bs := failoverInput(rv, func(b *config.BackendView, fb *failover.Backend) {
		fb.ID = d.reg.backend(r.Name, b.Addr)
		d.applyHealth(r, b.Addr, fb, warm)
	})
	hasGroup := func(name string) bool {
		return slices.ContainsFunc(groups, func(g failover.Group) bool { return g.Name == name })
	}
	for addr, rb := range rt.removed {
		if slices.ContainsFunc(rv.Backends, func(b config.BackendView) bool { return b.Addr == addr }) {
			delete(rt.removed, addr) // back in the configuration
			continue
		}
		g := rb.group
		if !hasGroup(g) {
			g = "~removed"
			if !hasGroup(g) {
				groups = append(groups, failover.Group{Name: g, Role: failover.RolePrimary, CapacityScaler: 1})
			}
		}
		bs = append(bs, failover.Backend{Name: addr.String(), ID: d.reg.backend(r.Name, addr), Group: g, Removed: true, RemovedAt: rb.at, Health: failover.HealthUnknown})
	}
	return groups, bs
}

func matchOf(r *config.Rule) dataplane.RuleMatch {
	m := dataplane.RuleMatch{VIP: r.VIP.As16(), Protocol: ruleProtocols.of(r.Protocol), AllPorts: r.Ports.All || r.Protocol == config.ProtocolL3Default}
	for _, pr := range r.Ports.Ranges {
		m.Ports = append(m.Ports, dataplane.PortRange{Lo: pr.First, Hi: pr.Last})
	}
	return m
}

// vipsOf is the rule's part of the XDP program's VIP set.
func vipsOf(r *config.Rule) []engine.VIP {
	switch {
	case r.Protocol == config.ProtocolL3Default:
		return []engine.VIP{{Addr: r.VIP}}
	case r.Ports.All:
		return []engine.VIP{{Addr: r.VIP, Proto: ipProtocols.of(r.Protocol)}}
	}
	var out []engine.VIP
	for _, pr := range r.Ports.Ranges {
		for p := int(pr.First); p <= int(pr.Last); p++ {
			out = append(out, engine.VIP{Addr: r.VIP, Proto: ipProtocols.of(r.Protocol), Port: uint16(p)})
		}
	}
	return out
}
