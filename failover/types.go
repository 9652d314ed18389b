package failover

import (
	"net/netip"
	"time"
)

// Health is a backend's health-check verdict.
type Health uint8

const (
	// HealthUnknown is the zero value: no verdict yet. It counts as not
	// healthy everywhere (as GCP and Envoy start probes DOWN until proven).
	HealthUnknown Health = iota
	HealthHealthy
	HealthUnhealthy
)

var healthNames = [...]string{"UNKNOWN", "HEALTHY", "UNHEALTHY"}

func (h Health) String() string { return enumName(healthNames[:], uint8(h)) }

// WeightState says whether the weight header of the last probe was usable;
// the names follow GCP's HealthStatus.weightError.
type WeightState uint8

const (
	WeightOK          WeightState = iota // header present and 0..1000
	WeightMissing                        // MISSING_WEIGHT: no header
	WeightInvalid                        // INVALID_WEIGHT: header not an integer 0..1000
	WeightUnavailable                    // UNAVAILABLE_WEIGHT: probe timed out or failed before a response
)

var weightStateNames = [...]string{"OK", "MISSING_WEIGHT", "INVALID_WEIGHT", "UNAVAILABLE_WEIGHT"}

func (s WeightState) String() string { return enumName(weightStateNames[:], uint8(s)) }

// Admin is the operator's state of a backend (CLI overlay).
type Admin uint8

const (
	AdminActive  Admin = iota
	AdminDrained       // xlb backend drain: no new connections, entries honoured until the draining timeout
)

var adminNames = [...]string{"ACTIVE", "DRAINED"}

func (a Admin) String() string { return enumName(adminNames[:], uint8(a)) }

// Role is a backend group's failover role.
type Role uint8

const (
	RolePrimary Role = iota
	RoleFailover
)

var roleNames = [...]string{"PRIMARY", "FAILOVER"}

func (r Role) String() string { return enumName(roleNames[:], uint8(r)) }

// MaxGroupsPerRole is GCP's limit of 50 primary and 50 failover groups.
const MaxGroupsPerRole = 50

// MaxWeight is the largest weight a health check may report.
const MaxWeight = 1000

// MaxConnectionDrainingTimeout bounds Policy.ConnectionDrainingTimeout (GCP: 0–3600 s).
const MaxConnectionDrainingTimeout = 3600 * time.Second

// Backend is one backend of a rule as the control plane sees it.
type Backend struct {
	Name  string // the backend's address as configured; stable identity, the sort key
	ID    uint32 // appliance-local slot the dataplane stores in conntrack entries
	Group string // name of its Group

	Health      Health
	Weight      uint32 // last weight reported by the health check, 0..MaxWeight; used when WeightState is WeightOK
	WeightState WeightState

	Admin     Admin
	DrainedAt time.Time // when the CLI drain started; zero means "now" at the first Compute that sees it

	Removed   bool      // gone from the configuration; kept as input until its entries have expired
	RemovedAt time.Time // when the removal was received; zero means "now" as above
}

// Group is a backend group.
type Group struct {
	Name           string
	Role           Role
	Zone           string  // empty: no zone
	CapacityScaler float64 // 0..1; 0 = no new connections, otherwise scales the members' weights
	Preferred      bool    // used while it has usable members, before the other groups of its role
}

// ZonalMode follows GCP's zonalAffinity.spillover values.
type ZonalMode uint8

const (
	ZonalDisabled       ZonalMode = iota // ZONAL_AFFINITY_DISABLED
	ZonalSpillCrossZone                  // ZONAL_AFFINITY_SPILL_CROSS_ZONE
	ZonalStayWithinZone                  // ZONAL_AFFINITY_STAY_WITHIN_ZONE
)

var zonalModeNames = [...]string{"ZONAL_AFFINITY_DISABLED", "ZONAL_AFFINITY_SPILL_CROSS_ZONE", "ZONAL_AFFINITY_STAY_WITHIN_ZONE"}

func (m ZonalMode) String() string { return enumName(zonalModeNames[:], uint8(m)) }

// ClientZone maps clients whose source address is in Prefix to Zone.
type ClientZone struct {
	Prefix netip.Prefix
	Zone   string
}

// ZonalAffinity is a rule's zonal affinity configuration.
type ZonalAffinity struct {
	Mode           ZonalMode
	SpilloverRatio float64 // 0..1: stay in the zone while usable/all of the zone ≥ ratio (and ≥ 1 usable)
	Clients        []ClientZone
}

// Policy is the part of a forwarding rule that the eligible-set engine reads.
type Policy struct {
	WeightedMaglev bool // locality_lb_policy = WEIGHTED_MAGLEV

	FailoverRatio             float64       // 0..1
	DropTrafficIfUnhealthy    bool          // only with failover groups (docs/design.md#eligible-backends)
	ConnectionDrainOnFailover bool          // default true
	FailoverDrainTimeout      time.Duration // default 10m; 0 = entries end at the switch
	FailbackDelay             time.Duration // default 0 = immediate failback

	ConnectionDrainingTimeout time.Duration // 0..3600 s; 0 = entries of a drained/removed backend end at once

	AutoCapacityDrain bool
	Zonal             ZonalAffinity
}

// DefaultFailoverDrainTimeout is GCP's fixed 10 minutes.
const DefaultFailoverDrainTimeout = 10 * time.Minute

// DefaultPolicy returns the defaults of docs/design.md#rule-files: MAGLEV,
// ratio 0, draining on failover for 10 minutes, immediate failback, no
// connection draining, no auto capacity drain, no zonal affinity. The zero
// Policy is different (no draining on failover): start from this one.
func DefaultPolicy() Policy {
	return Policy{
		ConnectionDrainOnFailover: true,
		FailoverDrainTimeout:      DefaultFailoverDrainTimeout,
	}
}

func enumName(names []string, v uint8) string {
	if int(v) < len(names) {
		return names[v]
	}
	return "INVALID"
}
