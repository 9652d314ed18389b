package failover

import (
	"encoding/json"
	"fmt"
)

// A State is the only memory of a rule's engine (generations, drain
// deadlines, failback timers, the last side), so a process that hands its
// work to a successor hands over its States. MarshalCarry and
// UnmarshalCarry do that, fields the package keeps to itself included;
// the State's ordinary JSON (for `xlb status --json`) is unchanged.

// carried is the wire form of a State.
type carried struct {
	State *State `json:"state"`
	// What encoding/json leaves out.
	LastSide Role       `json:"last_side"`
	HasSide  bool       `json:"has_side"`
	Admin    []bool     `json:"admin"`    // per Backends index
	Raw      []uint32   `json:"raw"`      // per Eligible index
	ZoneRaw  [][]uint32 `json:"zone_raw"` // per Zones index, per member
}

// MarshalCarry encodes s for UnmarshalCarry in another process.
func (s *State) MarshalCarry() ([]byte, error) {
	c := carried{State: s, LastSide: s.lastSide, HasSide: s.hasSide}
	for i := range s.Backends {
		c.Admin = append(c.Admin, s.Backends[i].admin)
	}
	for i := range s.Eligible {
		c.Raw = append(c.Raw, s.Eligible[i].raw)
	}
	for _, z := range s.Zones {
		var raw []uint32
		for i := range z.Members {
			raw = append(raw, z.Members[i].raw)
		}
		c.ZoneRaw = append(c.ZoneRaw, raw)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("carry failover state: %w", err)
	}
	return b, nil
}

// UnmarshalCarry decodes what MarshalCarry encoded: a State that Compute
// treats exactly as the original when passed as prev.
func UnmarshalCarry(b []byte) (*State, error) {
	var c carried
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("carried failover state: %w", err)
	}
	s := c.State
	if s == nil {
		return nil, fmt.Errorf("carried failover state: empty")
	}
	if len(c.Admin) != len(s.Backends) || len(c.Raw) != len(s.Eligible) || len(c.ZoneRaw) != len(s.Zones) {
		return nil, fmt.Errorf("carried failover state: %d/%d/%d private fields for %d backends, %d members, %d zones",
			len(c.Admin), len(c.Raw), len(c.ZoneRaw), len(s.Backends), len(s.Eligible), len(s.Zones))
	}
	s.lastSide, s.hasSide = c.LastSide, c.HasSide
	for i := range s.Backends {
		s.Backends[i].admin = c.Admin[i]
	}
	for i := range s.Eligible {
		s.Eligible[i].raw = c.Raw[i]
	}
	for zi := range s.Zones {
		if len(c.ZoneRaw[zi]) != len(s.Zones[zi].Members) {
			return nil, fmt.Errorf("carried failover state: zone %s: %d weights for %d members", s.Zones[zi].Zone, len(c.ZoneRaw[zi]), len(s.Zones[zi].Members))
		}
		for i := range s.Zones[zi].Members {
			s.Zones[zi].Members[i].raw = c.ZoneRaw[zi][i]
		}
	}
	return s, nil
}
