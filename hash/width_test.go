package hash

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestSlotWidth: a table's slots are as wide as its largest ID needs, and
// the width changes no placement: the same names own the same slots
// whatever IDs they carry.
func TestSlotWidth(t *testing.T) {
	names := testBackends(40, 3)
	ref := mustBuild(t, withIDs(names, 1<<24), 4099, 7)
	if ref.SlotBytes() != 4 {
		t.Fatalf("IDs from 2^24: %d bytes per slot, want 4", ref.SlotBytes())
	}
	for _, tc := range []struct {
		first uint32
		width int
	}{{0, 1}, {255 - 39, 1}, {256 - 39, 2}, {65535 - 39, 2}, {65536 - 39, 4}, {1<<32 - 40, 4}} {
		t.Run(fmt.Sprint(tc.first), func(t *testing.T) {
			tab := mustBuild(t, withIDs(names, tc.first), 4099, 7)
			if tab.SlotBytes() != tc.width {
				t.Errorf("IDs %d…%d: %d bytes per slot, want %d", tc.first, tc.first+39, tab.SlotBytes(), tc.width)
			}
			ids, refIDs := tab.SlotIDs(), ref.SlotIDs()
			for s := range ids {
				if ids[s]-tc.first != refIDs[s]-1<<24 {
					t.Fatalf("slot %d: ID %d (name %d), the 4-byte table has name %d", s, ids[s], ids[s]-tc.first, refIDs[s]-1<<24)
				}
				if id, ok := tab.Lookup(uint64(s) << 32); !ok || id != ids[tab.Slot(uint64(s)<<32)] {
					t.Fatalf("Lookup disagrees with SlotIDs at hash %#x", uint64(s)<<32)
				}
			}
			if d, err := Delta(ref, tab); err != nil || d.Changed != 0 {
				t.Errorf("Delta against the 4-byte table: %+v, %v; want nothing changed", d, err)
			}
		})
	}
}

func withIDs(bs []Backend, first uint32) []Backend {
	out := make([]Backend, len(bs))
	for i, b := range bs {
		b.ID = first + uint32(i)
		out[i] = b
	}
	return out
}

// TestTableMemory: a 100-backend table of the size TableSizeFor gives
// costs about one byte per slot (the allocator rounds large objects up to
// pages) and its sorted copy of the set, where four-byte IDs and owners
// cost eight bytes per slot.
func TestTableMemory(t *testing.T) {
	m, err := TableSizeFor(100)
	if err != nil {
		t.Fatal(err)
	}
	bs := withIDs(testBackends(100, 1), 0)
	var before, after runtime.MemStats
	tabs := make([]*MaglevTable, 200)
	mustBuild(t, bs, m, 0) // the scratch pool's first fill
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range tabs {
		tabs[i] = mustBuild(t, bs, m, uint64(i))
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(len(tabs))
	t.Logf("M = %d: %.0f bytes per table (%.2f per slot)", m, per, per/float64(m))
	if limit := 1.15*float64(m) + 40*float64(len(bs)); per < float64(m) || per > limit {
		t.Errorf("%.0f bytes per table of %d one-byte slots and %d backends, want at most %.0f", per, m, len(bs), limit)
	}
	runtime.KeepAlive(tabs)
}

// TestLookupInlines: Lookup stays inlinable into the packet path.
func TestLookupInlines(t *testing.T) {
	testutil.MustInline(t, "(*MaglevTable).Lookup")
}
