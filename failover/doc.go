// Package failover is the eligible-set engine of a forwarding rule: health,
// weight, role, admin state, capacity and zone in; the eligible tier, the
// members with their Maglev weights, one view per client zone, and the data
// the dataplane needs to decide whether a conntrack entry is still valid
// out (docs/design.md#eligible-backends).
//
// # Ownership and threading
//
// Compute is a pure function: plain values in, a new immutable *State
// out, time passed as now (tests drive it with a fake clock). It runs on
// the control-plane goroutine on every health, weight, role, admin,
// membership or config change, and again at State.NextCompute when a
// timer is pending (failback delay, undrain hold, drain deadlines). The
// previous State of the same rule is its only memory: pass it back as
// prev. It never runs on the packet path, never blocks a worker and
// allocates freely. The control plane builds Maglev tables from
// State.Eligible (and State.Zones) and publishes them in a snapshot.
//
// Two functions are meant for the packet path and allocate nothing:
// Persists (the persistence table) and Gens.Valid (the conntrack validity
// rule, which the dataplane's workers run on their copy of the fields).
//
// # Backend states
//
//	             health check                      CLI / config
//	UNKNOWN ──pass──▶ HEALTHY ◀──────▶ UNHEALTHY     ACTIVE ──drain / remove──▶ DEPARTED
//	   ▲  (start)        │ not healthy while the        ▲   (DrainGen++, entries    │
//	   └─────────────────┘ eligible set has a healthy   │    until start+timeout)   │
//	                       member: UnhealthyGen++       │                           │
//	                                                    └──────── undrain ──────────┘
//	in service = ACTIVE ∧ group capacity > 0 ∧ group not auto-drained
//	usable     = in service ∧ HEALTHY ∧ (WEIGHTED_MAGLEV ⇒ weight > 0)
//
// # Tier transitions (failover groups present)
//
//	            primaries below the ratio, failover usable
//	PRIMARY ──────────────────────────────────────────────▶ FAILOVER
//	   ▲ ◀──── primaries fine again, held for failback_delay ──── │
//	   │                                                         │ no usable failover,
//	   │ primaries fine again (immediate)                        │ usable primaries
//	   └────────────── PRIMARY_FALLBACK ◀────────────────────────┘
//	        (also straight from PRIMARY: below the ratio, no usable failover)
//
//	any tier ── nothing usable ──▶ LAST_RESORT (all primaries in service)
//	                          or ▶ EMPTY (drop_traffic_if_unhealthy, or nothing in service)
//	"primaries fine" = usable primaries ≥ 1 and usable/all primaries ≥ ratio
//
// Every change of tier is an Event. A change between the primary side
// (PRIMARY, PRIMARY_FALLBACK, LAST_RESORT) and the failover side (FAILOVER),
// possibly through EMPTY, is a switch: with connection_drain_on_failover =
// false it increments State.FlushGen (the dataplane compares it with the rule
// generation of each entry); with true every backend outside the new eligible
// set departs with failover_drain_timeout (those that just left it, and also
// those that were already out but may hold older entries: the contract bounds
// all existing connections at a switch, docs/design.md#draining-on-failover),
// unless it is already draining for a CLI drain or a removal.
//
// # Conntrack validity
//
// An entry records the rule's FlushGen and its backend's Stamp (UnhealthyGen,
// DrainGen) when it is created. It is valid while
//
//	entry.FlushGen == State.FlushGen
//	∧ (entry.UnhealthyGen == b.UnhealthyGen ∨ Persists(policy, mode, affinity, proto))
//	∧ (entry.DrainGen == b.DrainGen ∨ (entry.DrainGen ≥ b.DrainFloor ∧ now < b.DrainUntil))
//
// (Gens.Valid; an entry records the generations in 16 bits, compared
// wrap-safe: see Gens), so invalidation is O(1) and lazy: entries removed
// while a backend was unhealthy do not come back when it recovers,
// replacement entries (and entries created while it was unhealthy, in last
// resort) survive the recovery, and entries of a drained backend do not
// come back when it is undrained.
//
// UnhealthyGen increments when a backend's flows start being diverted: it
// is not healthy and the eligible set has a healthy member, where before
// one of the two did not hold. A backend that fails while another is
// healthy therefore loses its non-persisting entries at once; one that
// fails while nothing is healthy keeps them (NEVER_PERSIST's "unless all
// backends are unhealthy": a flow moved from one unhealthy backend to
// another gains nothing, and the flows of every protocol are treated
// alike), and loses them when some other backend becomes healthy; if it
// recovers first, its flows never move. Entries made in last resort on a
// backend that is still unhealthy when something recovers are diverted
// too.
//
// # Decisions (where the contract and the seeds are silent)
//
//   - Health UNKNOWN (no verdict yet) counts as not healthy everywhere, as
//     GCP and Envoy start probes DOWN until proven. HEALTHY → UNKNOWN
//     increments UnhealthyGen (when something else is healthy); UNKNOWN →
//     UNHEALTHY does not. A backend seen for the first time starts at
//     generation 0.
//   - "All backends unhealthy"
//     (docs/design.md#persistence-on-unhealthy-backends): no member of the
//     rule's eligible set is healthy (last resort, EMPTY, or weighted set 2),
//     judged on the rule's default view, not per zone. Then no flow is
//     diverted, whatever the persistence policy; see "Conntrack validity".
//   - Weights are used only with WEIGHTED_MAGLEV. A weight whose state is not
//     OK counts as 0 (docs/design.md#weights), whatever the Weight field
//     says; an OK weight above 1000 is an input error.
//   - Failover with weights (seeds open question D.1): usable = healthy, in
//     service and weight > 0 on both sides, and the ratio is usable primaries
//     over all configured primaries. Setting the primaries' weight to 0 is
//     thus a way to fail over for patching, as the seeds describe. Last
//     resort: primaries in service with weight > 0 at their weights, else all
//     primaries in service at equal weights.
//   - "All primaries" in the ratio counts configured (not removed) primaries,
//     including drained ones and those of capacity-0 or auto-drained groups:
//     taking capacity away counts against the ratio.
//   - Last resort never includes backends that are drained, removed, or in a
//     capacity-0 or auto-drained group ("no new connections" means it); if
//     nothing else is left the tier is EMPTY even without
//     drop_traffic_if_unhealthy.
//   - Without failover groups drop_traffic_if_unhealthy has no effect (it is
//     part of the failover policy); the configuration check rejects a
//     [failover] table with keys and no failover group.
//     Tier is PRIMARY when there are usable backends, else LAST_RESORT (the
//     weighted sets 2–4 are reported in State.WeightSet).
//   - Maglev weights: base weight (the reported weight, or 1 where the
//     contract says equal weights or without WEIGHTED_MAGLEV) times the group's
//     capacity scaler in thousandths (any scaler > 0 keeps at least 1/1000),
//     then divided by the GCD of the set: equal weights come out as 1, and a
//     scaler 0.5 on weight 1 gives 1 against 2 for weight 1 at scaler 1.
//     Zone views are reduced on their own. Equal-weight sets still honour
//     the capacity scaler.
//   - Failback hysteresis applies only to FAILOVER → PRIMARY while failover
//     backends are still usable: it waits until the primaries' condition has
//     held for failback_delay (State.FailbackPendingSince). Leaving the
//     primaries, and any move forced by the failover side becoming unusable,
//     is immediate.
//   - Departures (failover drain, CLI drain, removal) share one generation
//     per backend. The drain start is the time given in the input (the CLI
//     command, the config reload), clamped to now; a zero time means now. A
//     changed timeout applies to later departures. When a departure starts
//     while older entries are still draining, the earlier deadline wins for
//     all entries of older generations (never longer than promised; entries
//     made between two overlapping departures may be cut short). Drained then
//     removed keeps the drain's deadline.
//   - Removed backends stay in State.Backends while the caller still passes
//     them; it may drop them once now ≥ DrainUntil. A slot ID must not be
//     reused before DrainUntil plus the idle timeout: a stale entry of the
//     old backend would match the new one's generations (both start at 0).
//     Validate rejects two inputs sharing a slot, removed ones included.
//   - Capacity scaler 0 and auto capacity drain stop new connections but do
//     not start a departure: existing entries run on until idle.
//   - Preferred groups narrow PRIMARY, FAILOVER, PRIMARY_FALLBACK and the
//     first weighted set to the usable members of preferred groups when
//     there is one; they do not change the ratio nor last resort.
//   - Auto capacity drain: share = healthy / configured members of a group
//     (admin state ignored; empty groups never drain). Drain below 25 %,
//     undrain once ≥ 35 % has held for 60 s. At most floor(50 % × groups of
//     the rule) are drained, so a rule with one group never drains it. When
//     the cap binds, drained groups keep their place and leave only by the
//     undrain rule; new candidates drain lowest share first, then by name.
//     If groups disappear and the drained ones exceed the cap, the
//     healthiest are released first.
//   - Zonal affinity (SPILL_CROSS_ZONE): a zone keeps its own members when it
//     has ≥ 1 usable eligible member and usable/all ≥ spillover ratio, "all"
//     being the zone's configured backends of the active side; otherwise the
//     whole eligible set. STAY_WITHIN_ZONE keeps the zone's usable eligible
//     members, else its eligible members, else every backend of the zone in
//     service, healthy or not, at equal weights (the API's "if none are
//     healthy, all endpoints in the local zone";
//     docs/design.md#zones-capacity-and-preferred-groups), else nothing: new
//     connections from that zone are dropped (a zone with nothing in service,
//     or the rule's tier is EMPTY). Views exist for every zone named by a
//     group or a client prefix; clients without a zone use State.Eligible.
//     ZoneOf is a longest-prefix match for the control plane; the dataplane
//     builds its own lookup.
//   - Events: a tier change (including the first, from NONE), a group auto
//     drained or undrained. State.History keeps the last MaxHistory.
package failover
