package daemon

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"
	"sync"

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
	// What is hashed goes through one buffer, reused (a digest is computed
	// by whichever goroutine first asks, several at once): a digest of
	// every rule, on the first status after a start, makes little garbage.
	bp := digestBuffers.Get().(*[]byte)
	defer digestBuffers.Put(bp)
	h := sha256.New()
	buf := append((*bp)[:0], "xlb table digest v1\x00"...)
	buf = binary.BigEndian.AppendUint64(buf, seed)
	buf = binary.BigEndian.AppendUint64(buf, uint64(r.Affinity))
	buf = digestTable(h, buf, r.Table)
	for _, z := range r.ZoneTables() {
		a := z.Prefix.Addr().As16()
		buf = append(buf, a[:]...)
		buf = binary.BigEndian.AppendUint64(buf, uint64(z.Prefix.Bits()))
		buf = digestTable(h, buf, z.Table)
	}
	h.Write(buf)
	*bp = buf[:0]
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// digestBuffers hold tableDigest's buffers.
var digestBuffers = sync.Pool{New: func() any { b := make([]byte, 0, digestFlush+64); return &b }}

// digestFlush is how many bytes the buffer collects before it is hashed.
const digestFlush = 4096

// digestTable appends one Maglev table to buf, hashing buf into h when it
// is full: its size, its members sorted by name with their weights, then
// each slot as the index of its member in that order (0xffff for an empty
// slot).
func digestTable(h hash.Hash, buf []byte, t *xhash.MaglevTable) []byte {
	flush := func() {
		if len(buf) >= digestFlush {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	if t == nil {
		return binary.BigEndian.AppendUint64(buf, 0)
	}
	buf = binary.BigEndian.AppendUint64(buf, uint64(t.Size()))
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
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(members)))
	for i, m := range members {
		buf = append(buf, m.Name...)
		buf = append(buf, 0)
		buf = binary.BigEndian.AppendUint64(buf, uint64(m.Weight))
		index[m.ID] = uint16(i)
		flush()
	}
	if t.SlotBytes() == 0 {
		return buf // no backends, no slots
	}
	for s := range t.Size() {
		pos := uint16(0xffff)
		if id, ok := t.SlotID(s); ok && id <= maxID {
			pos = index[id]
		}
		buf = binary.BigEndian.AppendUint16(buf, pos)
		flush()
	}
	return buf
}
