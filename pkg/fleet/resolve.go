package fleet

import (
	"net/netip"

	"github.com/xlbnet/xlb/pkg/dataplane"
)

// resolved maps fleet-wide names to this appliance's slots for one
// snapshot: rules by RuleID of their name, backends by address. Rule and
// backend slots are local (each appliance hands them out in its own
// order); names are what the fleet shares.
type resolved struct {
	snap  *dataplane.Snapshot
	rules map[uint64]uint16
	backs []map[netip.Addr]uint32 // per rule slot
	ids   []uint64                // per rule slot: RuleID of its name
}

// update rebuilds the maps when s is another snapshot than the last one.
func (r *resolved) update(s *dataplane.Snapshot) {
	if s == nil || s == r.snap {
		return
	}
	r.snap = s
	r.rules = make(map[uint64]uint16, len(s.Rules))
	r.backs = make([]map[netip.Addr]uint32, len(s.Rules))
	r.ids = make([]uint64, len(s.Rules))
	for i := range s.Rules {
		rule := s.Rules[i]
		if !rule.Present {
			continue
		}
		id := RuleID(rule.Name)
		r.rules[id], r.ids[i] = uint16(i), id
		m := make(map[netip.Addr]uint32, len(rule.Backends))
		for j := range rule.Backends {
			if rule.Backends[j].Present {
				m[netip.AddrFrom16(rule.Backends[j].Addr).Unmap()] = uint32(j)
			}
		}
		r.backs[i] = m
	}
}

// backend returns the rule's backend at slot b, if both are present.
func (r *resolved) backend(rule uint16, b uint32) (*dataplane.Rule, *dataplane.Backend, bool) {
	if r.snap == nil || int(rule) >= len(r.snap.Rules) || !r.snap.Rules[rule].Present {
		return nil, nil, false
	}
	rl := r.snap.Rules[rule]
	if int(b) >= len(rl.Backends) || !rl.Backends[b].Present {
		return nil, nil, false
	}
	return rl, &rl.Backends[b], true
}
