package dataplane

import (
	"reflect"
	"testing"
)

// TestRuleHotFields: every field a packet reads on a tracked hit or a
// miss lies in a Rule's first 64 bytes, Persist right after, and a
// Backend's packet fields in its first 24.
func TestRuleHotFields(t *testing.T) {
	check := func(typ reflect.Type, limit uintptr, names ...string) {
		t.Helper()
		for _, n := range names {
			f, ok := typ.FieldByName(n)
			if !ok {
				t.Fatalf("%s has no field %s", typ, n)
			}
			if end := f.Offset + f.Type.Size(); end > limit {
				t.Errorf("%s.%s ends at byte %d, beyond %d", typ, n, end, limit)
			}
		}
	}
	check(reflect.TypeFor[Rule](), 64, "Backends", "Table", "zones", "Sources", "FlushGen", "Idle", "Affinity", "Mode", "FragmentTracking", "Present")
	check(reflect.TypeFor[Rule](), 128, "Persist")
	check(reflect.TypeFor[Backend](), 24, "Template", "Present", "UnhealthyGen", "DrainGen", "DrainFloor", "DrainUntil")
}

func TestProtoSet(t *testing.T) {
	var s ProtoSet
	for _, p := range []uint8{0, 6, 17, 63, 64, 200, 255} {
		s.Set(p, true)
	}
	s.Set(17, false)
	for p := range 256 {
		want := p == 0 || p == 6 || p == 63 || p == 64 || p == 200 || p == 255
		if s.Has(uint8(p)) != want {
			t.Errorf("Has(%d) = %v, want %v", p, !want, want)
		}
	}
}
