package hash

import (
	"strings"
	"testing"
)

// bruteDelta recomputes a Diff's counters from the public slot arrays and
// a name lookup, independently of Delta's merge.
func bruteDelta(old, new *MaglevTable, oldNames, newNames map[uint32]string) (changed, survivor uint32, lost, gained map[string]uint32) {
	lost, gained = map[string]uint32{}, map[string]uint32{}
	inNew := map[string]bool{}
	for _, n := range newNames {
		inNew[n] = true
	}
	oi, ni := old.SlotIDs(), new.SlotIDs()
	for s := range old.Size() {
		var on, nn string
		if oi != nil {
			on = oldNames[oi[s]]
		}
		if ni != nil {
			nn = newNames[ni[s]]
		}
		if on == nn {
			continue
		}
		changed++
		if on != "" {
			lost[on]++
			if inNew[on] {
				survivor++
			}
		}
		if nn != "" {
			gained[nn]++
		}
	}
	return changed, survivor, lost, gained
}

func names(bs []Backend) map[uint32]string {
	m := map[uint32]string{}
	for _, b := range bs {
		m[b.ID] = b.Name
	}
	return m
}

func TestDeltaMatchesBruteForce(t *testing.T) {
	base := testBackends(20, 10)
	grown := append(testBackends(20, 10), Backend{Name: "10.9.9.9", ID: 999, Weight: 10})
	shrunk := testBackends(20, 10)[:15]
	reweighted := testBackends(20, 10)
	reweighted[3].Weight = 40
	reweighted[7].Weight = 0

	tests := []struct {
		name     string
		old, new []Backend
	}{
		{"add one", base, grown},
		{"remove five", base, shrunk},
		{"reweight", base, reweighted},
		{"empty to full", nil, base},
		{"full to empty", base, nil},
		{"unchanged", base, base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ot, nt := mustBuild(t, tt.old, 1009, 3), mustBuild(t, tt.new, 1009, 3)
			d, err := Delta(ot, nt)
			if err != nil {
				t.Fatal(err)
			}
			changed, survivor, lost, gained := bruteDelta(ot, nt, names(tt.old), names(tt.new))
			if d.Size != 1009 || d.Changed != changed || d.SurvivorMoved != survivor {
				t.Errorf("Diff{Size %d, Changed %d, SurvivorMoved %d}, want {1009, %d, %d}", d.Size, d.Changed, d.SurvivorMoved, changed, survivor)
			}
			seen := map[string]bool{}
			for i, r := range d.Backends {
				if i > 0 && strings.Compare(d.Backends[i-1].Name, r.Name) >= 0 {
					t.Errorf("rows not sorted by name at %q", r.Name)
				}
				seen[r.Name] = true
				if r.Lost != lost[r.Name] || r.Gained != gained[r.Name] {
					t.Errorf("%s: lost %d gained %d, want %d %d", r.Name, r.Lost, r.Gained, lost[r.Name], gained[r.Name])
				}
				if before, in := ot.Slots(r.Name); r.Before != before || r.InOld != in {
					t.Errorf("%s: Before %d InOld %v, want %d %v", r.Name, r.Before, r.InOld, before, in)
				}
				if after, in := nt.Slots(r.Name); r.After != after || r.InNew != in {
					t.Errorf("%s: After %d InNew %v, want %d %v", r.Name, r.After, r.InNew, after, in)
				}
				if int64(r.After)-int64(r.Before) != int64(r.Gained)-int64(r.Lost) {
					t.Errorf("%s: After-Before %d != Gained-Lost %d", r.Name, int64(r.After)-int64(r.Before), int64(r.Gained)-int64(r.Lost))
				}
			}
			for _, b := range append(append([]Backend(nil), tt.old...), tt.new...) {
				if !seen[b.Name] {
					t.Errorf("no row for %s", b.Name)
				}
			}
		})
	}
}

func TestDeltaComparesNamesNotIDs(t *testing.T) {
	a := testBackends(10, 1)
	b := testBackends(10, 1)
	for i := range b {
		b[i].ID += 5000
	}
	d, err := Delta(mustBuild(t, a, 251, 1), mustBuild(t, b, 251, 1))
	if err != nil {
		t.Fatal(err)
	}
	if d.Changed != 0 {
		t.Errorf("renumbering IDs changed %d slots, want 0", d.Changed)
	}
}

func TestDeltaNilAndSizes(t *testing.T) {
	tab := mustBuild(t, testBackends(4, 1), 251, 1)
	if d, err := Delta(nil, tab); err != nil || d.Changed != 251 || d.SurvivorMoved != 0 {
		t.Errorf("Delta(nil, t) = %+v, %v; want all 251 slots changed", d, err)
	}
	if d, err := Delta(tab, nil); err != nil || d.Changed != 251 {
		t.Errorf("Delta(t, nil) = %+v, %v; want all 251 slots changed", d, err)
	}
	if d, err := Delta(nil, nil); err != nil || d.Size != 0 {
		t.Errorf("Delta(nil, nil) = %+v, %v", d, err)
	}
	other := mustBuild(t, testBackends(4, 1), 257, 1)
	if _, err := Delta(tab, other); err == nil || !strings.Contains(err.Error(), "sizes differ") {
		t.Errorf("Delta of 251 and 257 slots: err = %v, want sizes differ", err)
	}
}
