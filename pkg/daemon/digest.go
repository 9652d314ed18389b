package daemon

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"

	xhash "github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/dataplane"
)

// tableDigest is a rule's table_digest (`xlb status`): a hash of what
// decides a new flow's backend on this appliance — the fleet-wide hash
// seed, the rule's session affinity, its weighted Maglev table slot by slot
// and the eligible set it was built from (names and weights), and each
// zonal table with its client prefix. Two appliances with the same
// configuration, seed and health view print the same digest, so the
// routers may move a flow between them (docs/design.md#rules-of-the-path:
// tables are pure functions of their inputs).
//
// Backends are named by their fleet-wide identity (the address), never by
// the appliance-local slot stored in the table: slots depend on the
// order a process saw reloads in. The seed enters the hash but cannot be
// read back from it. The first 16 hex digits of a SHA-256 are printed.
func tableDigest(seed uint64, r *dataplane.Rule) string {
	h := sha256.New()
	var b [8]byte
	put := func(x uint64) {
		binary.BigEndian.PutUint64(b[:], x)
		h.Write(b[:])
	}
	h.Write([]byte("xlb table digest v1\x00"))
	put(seed)
	put(uint64(r.Affinity))
	digestTable(h, put, r.Table)
	for _, z := range r.ZoneTables() {
		a := z.Prefix.Addr().As16()
		h.Write(a[:])
		put(uint64(z.Prefix.Bits()))
		digestTable(h, put, z.Table)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// digestTable writes one Maglev table: its size, its members sorted by
// name with their weights, then each slot as the index of its member in
// that order (0xffff for an empty slot).
func digestTable(h hash.Hash, put func(uint64), t *xhash.MaglevTable) {
	if t == nil {
		put(0)
		return
	}
	put(uint64(t.Size()))
	members := t.Backends()
	slices.SortFunc(members, func(a, b xhash.Backend) int { return cmp.Compare(a.Name, b.Name) })
	// Table ID → position in members (0xffff: none); IDs are backend
	// slots, small.
	var maxID uint32
	for _, m := range members {
		maxID = max(maxID, m.ID)
	}
	index := make([]uint16, maxID+1)
	for i := range index {
		index[i] = 0xffff
	}
	put(uint64(len(members)))
	for i, m := range members {
		h.Write([]byte(m.Name))
		h.Write([]byte{0})
		put(uint64(m.Weight))
		index[m.ID] = uint16(i)
	}
	if t.SlotBytes() == 0 {
		return // no backends, no slots
	}
	// The slots, streamed through a small buffer.
	var buf [4096]byte
	n := 0
	for s := range t.Size() {
		pos := uint16(0xffff)
		if id, ok := t.SlotID(s); ok && id <= maxID {
			pos = index[id]
		}
		binary.BigEndian.PutUint16(buf[n:], pos)
		if n += 2; n == len(buf) {
			h.Write(buf[:])
			n = 0
		}
	}
	h.Write(buf[:n])
}
