package failover

// Stamp is what a conntrack entry records about its backend when it is
// created: the backend's UnhealthyGen in the high 16 bits and its DrainGen
// in the low 16 (Gens.Stamp packs it; the dataplane keeps it in the
// entry's backend generation).
type Stamp uint32

// Gens is what the validity rule reads of a backend: its generations cut
// to the 16 bits an entry records. Equality (UnhealthyGen) and a signed
// difference (DrainGen against DrainFloor) are exact across the wrap from
// 65535 to 0, unless one backend goes through 65536 health flaps or 32768
// departures during the life of one entry.
type Gens struct {
	UnhealthyGen uint16
	DrainGen     uint16
	DrainFloor   uint16
}

// Stamp returns what a new entry to the backend records.
func (g Gens) Stamp() Stamp { return Stamp(uint32(g.UnhealthyGen)<<16 | uint32(g.DrainGen)) }

// Current reports whether s is the stamp a new entry to the backend
// records now: such an entry is valid whatever Valid's other arguments
// (TestValidWhenCurrent), so a caller may test Current first and compute
// them only when it fails.
func (g Gens) Current(s Stamp) bool {
	return uint16(s>>16) == g.UnhealthyGen && uint16(s) == g.DrainGen
}

// Valid is the conntrack validity rule ("Conntrack validity" in the
// package documentation) that the dataplane's workers run on every tracked
// hit: whether an entry stamped s may still be used. persists is
// Persists(policy, mode, affinity, proto) of the entry's rule and
// protocol; beforeDeadline says that now is before the backend's
// DrainUntil. The rule's flush generation is the caller's to compare. It
// allocates nothing and inlines.
func (g Gens) Valid(s Stamp, persists, beforeDeadline bool) bool {
	if uint16(s>>16) != g.UnhealthyGen && !persists {
		return false
	}
	if drainGen := uint16(s); drainGen != g.DrainGen {
		return int16(drainGen-g.DrainFloor) >= 0 && beforeDeadline
	}
	return true
}
