package config

import (
	"fmt"
	"net/netip"
)

// readGroups reads [[group]]; it reports whether the groups are complete
// enough for the checks between groups.
func readGroups(t *table, s *svcSrc) bool {
	r := &s.svc
	gts := t.tables("group")
	if len(gts) == 0 {
		if !t.has("group") {
			t.errorf("group", "missing: a %s needs at least one [[group]] with backends", s.noun())
		} else if a, ok := t.m["group"].([]any); ok && len(a) == 0 {
			t.errorf("group", "empty: a %s needs at least one [[group]] with backends", s.noun())
		}
		return false
	}
	ok := true
	names := map[string]int{}
	where := map[netip.Addr]string{}
	s.backendKeys = where
	for gi, gt := range gts {
		g := DefaultGroup()
		if gt.str("name", &g.Name) {
			if !validName(g.Name) {
				gt.errorf("name", "%q is not a valid group name (letters, digits, '-', '_', '.')", g.Name)
			} else if prev, dup := names[g.Name]; dup {
				gt.errorf("name", "%q is also the name of group[%d]", g.Name, prev)
			} else {
				names[g.Name] = gi
			}
		} else if !gt.has("name") {
			gt.errorf("name", "missing")
		}
		if !enum(gt, "role", roleNames, &g.Role) && gt.has("role") {
			ok = false
		}
		gt.str("zone", &g.Zone)
		gt.ratio("capacity_scaler", &g.CapacityScaler)
		gt.boolean("preferred", &g.Preferred)
		gt.rejected("failover_health_threshold", whyNoHealthThreshold)
		g.Backends = readBackends(gt, s, where)
		gt.done()
		r.Groups = append(r.Groups, g)
	}
	return ok
}

func readBackends(gt *table, s *svcSrc, where map[netip.Addr]string) []Backend {
	v, ok := gt.get("backends")
	if !ok {
		gt.errorf("backends", "missing (a list of addresses, may be empty)")
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		if ms, isTables := v.([]map[string]any); isTables { // [[group.backends]]
			list = make([]any, len(ms))
			for i, m := range ms {
				list[i] = m
			}
		} else {
			gt.wrongType("backends", "a list of addresses", v)
			return nil
		}
	}
	var out []Backend
	for i, e := range list {
		key := joinIndex(gt.key("backends"), i)
		var b Backend
		var addr string
		switch x := e.(type) {
		case string:
			addr = x
		case map[string]any:
			bt := newTable(gt.f, key, x)
			if !bt.str("address", &addr) {
				if !bt.has("address") {
					bt.errorf("address", "missing")
				}
				bt.done()
				continue
			}
			var w int64
			if bt.integer("weight", 0, MaxWeight, &w) {
				b.Weight, b.HasWeight = uint16(w), true
				if s.svc.LocalityLBPolicy != WeightedMaglev {
					bt.errorf("weight", "a static weight needs locality_lb_policy = \"WEIGHTED_MAGLEV\"")
				}
			}
			bt.done()
			key = bt.key("address")
		default:
			gt.f.errorf(key, "want an address or {address = \"…\", weight = N}, got %s", typeName(e))
			continue
		}
		a, why := parseAddr(addr)
		if why != "" {
			gt.f.errorf(key, "%q %s", addr, why)
			continue
		}
		if a.IsLoopback() {
			gt.f.errorf(key, "%q is a loopback address", addr)
			continue
		}
		if prev, dup := where[a]; dup {
			gt.f.errorf(key, "%s is already a backend of this %s (%s)", a, s.noun(), prev)
			continue
		}
		where[a] = key
		b.Addr = a
		out = append(out, b)
	}
	return out
}

// checkGroups applies the group rules: at least one backend, at most 50
// groups per role, failover needs a primary and a failover group.
func checkGroups(t *table, s *svcSrc, failoverSet bool) {
	r := &s.svc
	total := 0
	count := [2]int{}
	firstFailover := -1
	for gi, g := range r.Groups {
		total += len(g.Backends)
		count[g.Role]++
		if count[g.Role] == MaxGroupsPerRole+1 {
			t.f.errorf(joinIndex(t.key("group"), gi), "more than %d groups have role %s", MaxGroupsPerRole, g.Role)
		}
		if g.Role == RoleFailover && firstFailover < 0 {
			firstFailover = gi
		}
	}
	if total == 0 {
		t.errorf("group", "the %s has no backends", s.noun())
	}
	if count[RoleFailover] > 0 && count[RolePrimary] == 0 {
		t.f.errorf(joinKey(joinIndex(t.key("group"), firstFailover), "role"),
			"failover groups need at least one group with role primary")
	}
	if failoverSet && count[RoleFailover] == 0 {
		t.errorf("failover", "set, but no group has role failover (add one, or remove [failover])")
	}
}

// checkFamilies enforces what the encapsulations can carry: IPIP, GUE and
// GRE carry IPv4 in IPv4, IPv6 in IPv6 and IPv4 in IPv6; nothing carries
// IPv6 inside IPv4; DIRECT (MAC rewrite) keeps the packet as it is, so the
// backend address, used only to find its MAC, must be of the VIP's family.
// groups are the ones that serve rs (familyGroups); a wrong backend is
// reported at its key in s, once (seen), naming the rule when s is a
// service file.
func checkFamilies(rs *ruleSrc, s *svcSrc, groups []Group, seen map[netip.Addr]bool) {
	r := &rs.rule
	if !rs.vipOK {
		return
	}
	vip := "the VIP " + r.VIP.String()
	if !s.inline {
		vip = fmt.Sprintf("rule %q (%s) has the VIP %s, which", r.Name, r.File, r.VIP)
	}
	for _, g := range groups {
		for _, b := range g.Backends {
			if seen[b.Addr] {
				continue
			}
			// The backend's own key: its index in the file, which skipped
			// bad entries would shift in g.Backends.
			key := s.backendKeys[b.Addr]
			switch {
			case r.VIP.Is6() && b.Addr.Is4():
				s.f.errorf(key, "%s is IPv4 but %s is IPv6: no encapsulation carries IPv6 inside IPv4", b.Addr, vip)
			case s.svc.Encap.Type == EncapDirect && r.VIP.Is4() && b.Addr.Is6():
				s.f.errorf(key, "%s is IPv6 but %s is IPv4: encap DIRECT needs backends of the VIP's family (IPIP, GUE and GRE carry IPv4 in IPv6)", b.Addr, vip)
			case b.Addr == r.VIP && s.inline:
				s.f.errorf(key, "%s is the VIP itself", b.Addr)
			case b.Addr == r.VIP:
				s.f.errorf(key, "%s is the VIP of rule %q (%s)", b.Addr, r.Name, r.File)
			default:
				continue
			}
			if seen != nil {
				seen[b.Addr] = true
			}
		}
	}
}

// checkZones: an enabled zonal affinity needs zoned groups and client
// prefixes; prefixes of zones no group has are probably typos.
func checkZones(t *table, r *Service) {
	z := &r.ZonalAffinity
	zones := map[string]bool{}
	for _, g := range r.Groups {
		if g.Zone != "" {
			zones[g.Zone] = true
		}
	}
	za := joinKey(t.path, "zonal_affinity")
	if z.Mode == ZonalDisabled {
		if len(z.Clients) > 0 {
			t.f.warnf(joinKey(za, "clients"), "ignored: zonal_affinity.mode is ZONAL_AFFINITY_DISABLED")
		}
		return
	}
	if len(zones) == 0 {
		t.f.errorf(joinKey(za, "mode"), "%s needs groups with a zone", z.Mode)
	}
	if len(z.Clients) == 0 {
		t.f.warnf(joinKey(za, "mode"), "no zonal_affinity.clients prefixes: no client has a zone, so zonal affinity never applies")
	}
	warned := map[string]bool{}
	for _, c := range z.Clients {
		if len(zones) > 0 && !zones[c.Zone] && !warned[c.Zone] {
			warned[c.Zone] = true
			t.f.warnf(joinKey(joinKey(za, "clients"), c.Zone), "no group has zone %q", c.Zone)
		}
	}
}
