package dataplane

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/xlbnet/xlb/hash"
)

// zonePrefix sends clients whose source is in one prefix to their zone's
// Maglev table (zonal affinity,
// docs/design.md#zones-capacity-and-preferred-groups).
type zonePrefix struct {
	hi, lo         uint64 // the prefix in the 16-byte (IPv4-mapped) form
	maskHi, maskLo uint64
	bits           int
	table          *hash.MaglevTable
}

func newZonePrefix(p netip.Prefix, t *hash.MaglevTable) zonePrefix {
	p = p.Masked()
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96 // the IPv4-mapped form ::ffff:a.b.c.d
	}
	a := p.Addr().As16()
	z := zonePrefix{hi: binary.BigEndian.Uint64(a[0:8]), lo: binary.BigEndian.Uint64(a[8:16]), bits: bits, table: t}
	switch {
	case bits >= 64:
		z.maskHi = ^uint64(0)
		if bits > 64 {
			z.maskLo = ^uint64(0) << (128 - bits)
		}
	case bits > 0:
		z.maskHi = ^uint64(0) << (64 - bits)
	}
	return z
}

// zoneTable returns the Maglev table for a client: its zone's view when a
// client prefix matches (longest first), else the rule's default table.
func (r *Rule) zoneTable(src *[16]byte) *hash.MaglevTable {
	if r.zones == nil {
		return r.Table
	}
	zones := *r.zones
	hi, lo := binary.BigEndian.Uint64(src[0:8]), binary.BigEndian.Uint64(src[8:16])
	for i := range zones {
		z := &zones[i]
		if hi&z.maskHi == z.hi && lo&z.maskLo == z.lo {
			return z.table
		}
	}
	return r.Table
}

// setZones installs the zone tables: prefixes sorted longest first, so
// the first match is the longest-prefix match. A prefix whose zone has no
// view keeps the default table.
func (r *Rule) setZones(prefixes []netip.Prefix, zoneOf []string, tables map[string]*hash.MaglevTable) {
	var zones []zonePrefix
	for i, p := range prefixes {
		if t, ok := tables[zoneOf[i]]; ok {
			zones = append(zones, newZonePrefix(p, t))
		}
	}
	slices.SortStableFunc(zones, func(a, b zonePrefix) int { return cmp.Compare(b.bits, a.bits) })
	r.zones = nil
	if len(zones) > 0 {
		r.zones = &zones
	}
}

// SameTables reports whether r and o place new flows with the same
// tables: the same Maglev table and, under zonal affinity, the same client
// prefixes with the same tables (pointers: hash.Tables gives equal
// content the same table). The control plane keeps what it derived from
// r's tables (the table digest) when a rule is computed again without a
// change of its tables.
func (r *Rule) SameTables(o *Rule) bool {
	if r.Table != o.Table || (r.zones == nil) != (o.zones == nil) {
		return false
	}
	return r.zones == nil || slices.Equal(*r.zones, *o.zones)
}
