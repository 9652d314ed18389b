package failover

import (
	"cmp"
	"slices"
	"time"

	"github.com/xlbnet/xlb/hash"
)

// Tier is which backends the eligible set is drawn from
// (docs/design.md#eligible-backends).
type Tier uint8

const (
	TierNone            Tier = iota // no State yet (From of the first event)
	TierPrimary                     // usable primaries (no failover groups: usable backends)
	TierFailover                    // usable failover backends: the primaries fell below the ratio
	TierPrimaryFallback             // usable primaries because no failover backend is usable
	TierLastResort                  // nothing usable: all primaries in service (no failover groups: all backends)
	TierEmpty                       // eligible set empty: new connections are dropped
)

var tierNames = [...]string{"NONE", "PRIMARY", "FAILOVER", "PRIMARY_FALLBACK", "LAST_RESORT", "EMPTY"}

func (t Tier) String() string { return enumName(tierNames[:], uint8(t)) }

// side is which role a tier serves from; a change of side (ignoring
// TierEmpty) is a "switch between primary and failover backends".
func (t Tier) side() Role {
	if t == TierFailover {
		return RoleFailover
	}
	return RolePrimary
}

// WeightSet says which of the four weighted sets (no failover groups,
// WEIGHTED_MAGLEV) the eligible set is; WeightSetNone otherwise.
type WeightSet uint8

const (
	WeightSetNone              WeightSet = iota
	WeightSetHealthyWeighted             // (1) healthy, weight > 0
	WeightSetUnhealthyWeighted           // (2) unhealthy, weight > 0
	WeightSetHealthyZero                 // (3) healthy, weight 0: equal weights
	WeightSetAll                         // (4) all: equal weights
)

var weightSetNames = [...]string{"NONE", "HEALTHY_WEIGHTED", "UNHEALTHY_WEIGHTED", "HEALTHY_ZERO_WEIGHT", "ALL"}

func (w WeightSet) String() string { return enumName(weightSetNames[:], uint8(w)) }

// Member is one eligible backend with the weight it gets in the Maglev table.
type Member struct {
	Name   string
	ID     uint32
	Group  string
	Zone   string
	Weight uint32 // Maglev weight ≥ 1: relative, reduced by the GCD of the set (or of the zone view)
	Usable bool   // healthy and in service (false for last-resort members)

	raw uint32 // weight before the GCD reduction
}

// MaglevBackends returns members as the Maglev table is built from them:
// name, slot and Maglev weight.
func MaglevBackends(members []Member) []hash.Backend {
	out := make([]hash.Backend, len(members))
	for i, m := range members {
		out[i] = hash.Backend{Name: m.Name, ID: m.ID, Weight: m.Weight}
	}
	return out
}

// DrainReason says why a backend's older conntrack entries have a deadline.
type DrainReason uint8

const (
	DrainNone     DrainReason = iota
	DrainFailover             // left the eligible set at a primary/failover switch
	DrainAdmin                // drained by the CLI
	DrainRemoved              // removed from the configuration
)

var drainReasonNames = [...]string{"NONE", "FAILOVER", "ADMIN", "REMOVED"}

func (d DrainReason) String() string { return enumName(drainReasonNames[:], uint8(d)) }

// BackendState is the engine's view of one backend after a Compute.
type BackendState struct {
	Name        string
	ID          uint32
	Group       string
	Role        Role
	Zone        string
	Health      Health
	Weight      uint32 // reported weight as used: 0 unless WeightState is OK
	WeightState WeightState
	Admin       Admin
	Removed     bool
	InService   bool // may take new connections at all: not drained, not removed, group capacity > 0
	Usable      bool // InService, healthy and (WEIGHTED_MAGLEV) weight > 0
	Eligible    bool // member of State.Eligible

	// UnhealthyGen counts healthy → not-healthy transitions. An entry
	// stamped with an older value is invalid unless Persists(...) says so.
	UnhealthyGen uint32

	// DrainGen counts departures (failover switch away, CLI drain, removal).
	// Entries stamped with DrainGen are unaffected; entries stamped with an
	// older generation ≥ DrainFloor are honoured until DrainUntil; older
	// ones are invalid.
	DrainGen    uint32
	DrainFloor  uint32
	DrainUntil  time.Time
	DrainReason DrainReason // reason of the latest departure
	DepartedAt  time.Time   // start of the latest departure

	admin bool // departed by CLI drain or removal (carried over)
}

// Gens returns the backend's generations as the validity rule reads them:
// cut to the entries' 16 bits (see Gens).
func (b *BackendState) Gens() Gens {
	return Gens{UnhealthyGen: uint16(b.UnhealthyGen), DrainGen: uint16(b.DrainGen), DrainFloor: uint16(b.DrainFloor)}
}

// Stamp returns what a new conntrack entry to this backend records.
func (b *BackendState) Stamp() Stamp { return b.Gens().Stamp() }

// GroupState is the engine's view of one group after a Compute.
type GroupState struct {
	Name           string
	Role           Role
	Zone           string
	CapacityScaler float64 // as configured
	Preferred      bool
	Members        int // configured (not removed) backends
	Healthy        int // of which healthy

	AutoDrained  bool      // capacity forced to 0 by auto capacity drain
	RecoverSince time.Time // auto-drained and ≥ 35 % healthy since then; zero otherwise
}

// EventKind classifies an Event.
type EventKind uint8

const (
	EventTierSwitch EventKind = iota
	EventGroupAutoDrained
	EventGroupAutoUndrained
)

var eventKindNames = [...]string{"TIER_SWITCH", "GROUP_AUTO_DRAINED", "GROUP_AUTO_UNDRAINED"}

func (k EventKind) String() string { return enumName(eventKindNames[:], uint8(k)) }

// Event is one change for logs, metrics and `xlb status`.
type Event struct {
	Kind   EventKind
	At     time.Time
	From   Tier   // EventTierSwitch
	To     Tier   // EventTierSwitch
	Group  string // group events
	Reason string
	// Switched is true when the tier switch moved the eligible set between
	// primary and failover backends (flush or failover drain).
	Switched bool
}

// ZoneView is the eligible set for clients of one zone.
type ZoneView struct {
	Zone    string
	Local   bool     // narrowed to the zone; false: spilled to the whole eligible set
	Members []Member // sorted by Name
}

// MaxHistory bounds State.History.
const MaxHistory = 64

// State is the immutable output of Compute: never modify one, pass it
// back as prev to the next Compute.
type State struct {
	At        time.Time
	Tier      Tier
	WeightSet WeightSet
	Reason    string   // why this tier, one line for `xlb status`
	Eligible  []Member // sorted by Name; the default view

	// Zones holds one view per known zone (sorted by Zone) when zonal
	// affinity is on; clients with no zone use Eligible.
	Zones []ZoneView

	// FlushGen increments at every primary/failover switch while
	// ConnectionDrainOnFailover is false; entries of the rule created under
	// an older value are invalid.
	FlushGen uint64

	Backends []BackendState // sorted by Name, including removed ones still given as input
	Groups   []GroupState   // sorted by Name

	Events  []Event // new in this Compute
	History []Event // the last MaxHistory events, oldest first

	// FailbackPendingSince is set while a failback waits for FailbackDelay.
	FailbackPendingSince time.Time

	// NextCompute is the earliest time at which Compute with unchanged
	// inputs would give a different answer (failback delay, undrain hold,
	// a drain deadline); zero when none.
	NextCompute time.Time

	lastSide Role // side of the last non-empty tier
	hasSide  bool
}

// Backend returns the state of the backend named name.
func (s *State) Backend(name string) (*BackendState, bool) {
	i, ok := slices.BinarySearchFunc(s.Backends, name, func(b BackendState, n string) int { return cmp.Compare(b.Name, n) })
	if !ok {
		return nil, false
	}
	return &s.Backends[i], true
}

// Group returns the state of the group named name.
func (s *State) Group(name string) (*GroupState, bool) {
	i, ok := slices.BinarySearchFunc(s.Groups, name, func(g GroupState, n string) int { return cmp.Compare(g.Name, n) })
	if !ok {
		return nil, false
	}
	return &s.Groups[i], true
}

// Zone returns the view for zone, or the default view when the zone has
// none (unknown zone, zonal affinity off).
func (s *State) Zone(zone string) []Member {
	for i := range s.Zones {
		if s.Zones[i].Zone == zone {
			return s.Zones[i].Members
		}
	}
	return s.Eligible
}
