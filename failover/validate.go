package failover

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalidInput is wrapped by every error Validate returns.
var ErrInvalidInput = errors.New("invalid failover input")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidInput}, args...)...)
}

func validFraction(f float64) bool { return !math.IsNaN(f) && f >= 0 && f <= 1 }

// Validate checks a rule's policy, groups and backends. Compute calls it
// first; the config loader may call it to report errors early.
func Validate(p Policy, groups []Group, backends []Backend) error {
	if !validFraction(p.FailoverRatio) {
		return invalid("failover ratio %v not in [0, 1]", p.FailoverRatio)
	}
	if p.FailoverDrainTimeout < 0 {
		return invalid("failover drain timeout %v is negative", p.FailoverDrainTimeout)
	}
	if p.FailbackDelay < 0 {
		return invalid("failback delay %v is negative", p.FailbackDelay)
	}
	if p.ConnectionDrainingTimeout < 0 || p.ConnectionDrainingTimeout > MaxConnectionDrainingTimeout {
		return invalid("connection draining timeout %v not in [0s, %v]", p.ConnectionDrainingTimeout, MaxConnectionDrainingTimeout)
	}
	if err := validateZonal(p.Zonal); err != nil {
		return err
	}

	byName := make(map[string]*Group, len(groups))
	var perRole [2]int
	for i := range groups {
		g := &groups[i]
		if g.Name == "" {
			return invalid("group %d has no name", i)
		}
		if _, dup := byName[g.Name]; dup {
			return invalid("group %q defined twice", g.Name)
		}
		byName[g.Name] = g
		if g.Role > RoleFailover {
			return invalid("group %q: unknown role %d", g.Name, g.Role)
		}
		if !validFraction(g.CapacityScaler) {
			return invalid("group %q: capacity scaler %v not in [0, 1]", g.Name, g.CapacityScaler)
		}
		perRole[g.Role]++
	}
	if perRole[RolePrimary] > MaxGroupsPerRole || perRole[RoleFailover] > MaxGroupsPerRole {
		return invalid("%d primary and %d failover groups: at most %d of each", perRole[RolePrimary], perRole[RoleFailover], MaxGroupsPerRole)
	}
	if perRole[RoleFailover] > 0 && perRole[RolePrimary] == 0 {
		return invalid("failover groups need at least one primary group")
	}

	names := make(map[string]struct{}, len(backends))
	ids := make(map[uint32]string, len(backends))
	for i := range backends {
		b := &backends[i]
		if b.Name == "" {
			return invalid("backend %d has no name", i)
		}
		if _, dup := names[b.Name]; dup {
			return invalid("backend %q given twice", b.Name)
		}
		names[b.Name] = struct{}{}
		if other, dup := ids[b.ID]; dup {
			return invalid("backends %q and %q share slot %d", other, b.Name, b.ID)
		}
		ids[b.ID] = b.Name
		if _, ok := byName[b.Group]; !ok {
			return invalid("backend %q: unknown group %q", b.Name, b.Group)
		}
		if b.Health > HealthUnhealthy {
			return invalid("backend %q: unknown health %d", b.Name, b.Health)
		}
		if b.WeightState > WeightUnavailable {
			return invalid("backend %q: unknown weight state %d", b.Name, b.WeightState)
		}
		if b.WeightState == WeightOK && b.Weight > MaxWeight {
			return invalid("backend %q: weight %d above %d (report it as INVALID_WEIGHT)", b.Name, b.Weight, MaxWeight)
		}
		if b.Admin > AdminDrained {
			return invalid("backend %q: unknown admin state %d", b.Name, b.Admin)
		}
	}
	return nil
}

func validateZonal(z ZonalAffinity) error {
	if z.Mode > ZonalStayWithinZone {
		return invalid("unknown zonal affinity mode %d", z.Mode)
	}
	if !validFraction(z.SpilloverRatio) {
		return invalid("zonal spillover ratio %v not in [0, 1]", z.SpilloverRatio)
	}
	seen := make(map[string]string, len(z.Clients))
	for _, c := range z.Clients {
		if !c.Prefix.IsValid() {
			return invalid("zonal client prefix for zone %q is not valid", c.Zone)
		}
		if c.Prefix != c.Prefix.Masked() {
			return invalid("zonal client prefix %v has host bits set (want %v)", c.Prefix, c.Prefix.Masked())
		}
		if c.Zone == "" {
			return invalid("zonal client prefix %v has no zone", c.Prefix)
		}
		key := c.Prefix.String()
		if other, dup := seen[key]; dup {
			return invalid("zonal client prefix %v mapped to both %q and %q", c.Prefix, other, c.Zone)
		}
		seen[key] = c.Zone
	}
	return nil
}
