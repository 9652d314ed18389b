package failover

import (
	"net/netip"
	"slices"
)

// zoneViews fills State.Zones: one view per zone named by a group or a
// client prefix, when zonal affinity is on.
//
// SPILL_CROSS_ZONE: the view is the eligible members in the zone when at
// least one of them is usable and usable/all ≥ the spillover ratio, where
// "all" counts the zone's configured backends of the active side (primary
// or failover); otherwise the whole eligible set. STAY_WITHIN_ZONE: the
// usable eligible members in the zone, else all eligible members in the
// zone, else every backend of the zone in service, healthy or not, at equal
// weights (the API's "if none are healthy, all endpoints in the local
// zone"), else nothing: the zone's new connections are dropped, as they are
// when the rule's tier is EMPTY (drop_traffic_if_unhealthy).
func (w *work) zoneViews() {
	z := w.p.Zonal
	if z.Mode == ZonalDisabled {
		return
	}
	var zones []string
	for _, g := range w.st.Groups {
		if g.Zone != "" {
			zones = append(zones, g.Zone)
		}
	}
	for _, c := range z.Clients {
		zones = append(zones, c.Zone)
	}
	slices.Sort(zones)
	zones = slices.Compact(zones)

	side := w.st.Tier.side()
	w.st.Zones = make([]ZoneView, 0, len(zones))
	for _, zone := range zones {
		var inZone, usable []Member
		for _, m := range w.st.Eligible {
			if m.Zone != zone {
				continue
			}
			inZone = append(inZone, m)
			if m.Usable {
				usable = append(usable, m)
			}
		}
		all := 0
		for i := range w.st.Backends {
			b := &w.st.Backends[i]
			if b.Zone == zone && !b.Removed && b.Role == side {
				all++
			}
		}
		view := ZoneView{Zone: zone}
		switch z.Mode {
		case ZonalSpillCrossZone:
			if len(usable) > 0 && float64(len(usable)) >= z.SpilloverRatio*float64(all) {
				view.Local, view.Members = true, inZone
			} else {
				view.Members = slices.Clone(w.st.Eligible)
			}
		case ZonalStayWithinZone:
			view.Local = true
			switch {
			case len(usable) > 0:
				view.Members = usable
			case len(inZone) > 0:
				view.Members = inZone
			case w.st.Tier != TierEmpty:
				view.Members = w.members(w.filter(func(b *BackendState) bool { return b.Zone == zone && b.InService }), false)
			}
		}
		if view.Local {
			w.rescale(view.Members)
		}
		w.st.Zones = append(w.st.Zones, view)
	}
}

// rescale recomputes the Maglev weights of a subset of the eligible set
// from the unreduced weights, so a zone view gets the smallest integers
// with the same relative shares.
func (w *work) rescale(ms []Member) {
	for i := range ms {
		ms[i].Weight = ms[i].raw
	}
	reduceWeights(ms)
}

// ZoneOf returns the zone of a client address by longest-prefix match over
// the configured client prefixes (IPv4-mapped IPv6 addresses match IPv4
// prefixes). It is meant for the control plane and `xlb lookup`; the
// dataplane builds its own lookup structure from ZonalAffinity.Clients.
func (z *ZonalAffinity) ZoneOf(addr netip.Addr) (string, bool) {
	addr = addr.Unmap()
	best, zone := -1, ""
	for _, c := range z.Clients {
		if c.Prefix.Bits() > best && c.Prefix.Contains(addr) {
			best, zone = c.Prefix.Bits(), c.Zone
		}
	}
	return zone, best >= 0
}
