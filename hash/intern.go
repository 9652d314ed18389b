package hash

import (
	"encoding/binary"
	"runtime"
	"slices"
	"sync"
	"weak"
)

// Tables interns Maglev tables by content: Build returns a table still in
// use that was built from the same backend set (names, IDs, weights), size
// and seed, and builds only when there is none. Rules with identical
// backend sets and weights then share one table, and a rule rebuilt
// without a change gets its own table back, pointer-equal, without the
// build's cost. Tables are held weakly: one that no snapshot references
// any more is collected and forgotten. Safe for concurrent use; the zero
// value is ready.
type Tables struct {
	mu   sync.Mutex
	live map[uint64][]weak.Pointer[MaglevTable]

	built, shared uint64
}

// TablesStats counts what a Tables did.
type TablesStats struct {
	Live   int    // tables held (some may be about to be collected)
	Built  uint64 // builds, since the Tables was made
	Shared uint64 // calls answered with a live table instead
}

// Build is the package's Build, answered from the live tables when one has
// the same content.
func (ts *Tables) Build(backends []Backend, m uint32, seed uint64) (*MaglevTable, error) {
	bs, err := sortedSet(backends, m)
	if err != nil {
		return nil, err
	}
	key := contentKey(bs, m, seed)
	ts.mu.Lock()
	t := ts.find(key, bs, m, seed)
	ts.mu.Unlock()
	if t != nil {
		return t, nil
	}
	t = build(bs, m, seed) // without the lock: builds of different sets overlap
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if other := ts.find(key, bs, m, seed); other != nil {
		return other, nil // built meanwhile by another caller
	}
	if ts.live == nil {
		ts.live = map[uint64][]weak.Pointer[MaglevTable]{}
	}
	ts.live[key] = append(ts.live[key], weak.Make(t))
	ts.built++
	runtime.AddCleanup(t, ts.forget, key)
	return t, nil
}

// find returns the live table of this content, counting a share; ts.mu held.
func (ts *Tables) find(key uint64, bs []Backend, m uint32, seed uint64) *MaglevTable {
	for _, p := range ts.live[key] {
		if t := p.Value(); t != nil && t.m == m && t.seed == seed && slices.Equal(t.backends, bs) {
			ts.shared++
			return t
		}
	}
	return nil
}

// forget drops the collected tables under key (a table's cleanup).
func (ts *Tables) forget(key uint64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ps := slices.DeleteFunc(ts.live[key], func(p weak.Pointer[MaglevTable]) bool { return p.Value() == nil })
	if len(ps) == 0 {
		delete(ts.live, key)
	} else {
		ts.live[key] = ps
	}
}

// Stats returns the counts so far.
func (ts *Tables) Stats() TablesStats {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for _, ps := range ts.live {
		n += len(ps)
	}
	return TablesStats{Live: n, Built: ts.built, Shared: ts.shared}
}

// contentKey hashes what a table is built from (bs sorted by name).
func contentKey(bs []Backend, m uint32, seed uint64) uint64 {
	buf := make([]byte, 0, 16+len(bs)*24)
	buf = binary.LittleEndian.AppendUint64(buf, seed)
	buf = binary.LittleEndian.AppendUint32(buf, m)
	for _, b := range bs {
		buf = append(buf, b.Name...)
		buf = append(buf, 0)
		buf = binary.LittleEndian.AppendUint32(buf, b.ID)
		buf = binary.LittleEndian.AppendUint32(buf, b.Weight)
	}
	return Bytes(buf, 0)
}
