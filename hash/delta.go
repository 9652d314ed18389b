package hash

import (
	"cmp"
	"fmt"
	"slices"
)

// Diff is what changed between two tables of one size, slot by slot.
// Owners are compared by Backend.Name, the fleet-stable identity, never by
// ID (a caller may renumber IDs between builds).
type Diff struct {
	// Size is M, the number of slots compared.
	Size uint32
	// Changed counts the slots whose owner differs (including slots that
	// gained or lost their only owner when one table is empty). The share
	// of new flows that move is Changed / Size.
	Changed uint32
	// SurvivorMoved counts the slots whose old owner is still in the new
	// table's backend set but no longer owns them: the disruption a change
	// inflicts on backends it did not touch.
	SurvivorMoved uint32
	// Backends has one entry per name in either table, sorted by Name.
	Backends []BackendDiff
}

// BackendDiff is one backend's part in a Diff.
type BackendDiff struct {
	Name          string
	Before, After uint32 // slots held in the old and in the new table
	Lost          uint32 // slots held in old and not in new
	Gained        uint32 // slots held in new and not in old
	InOld, InNew  bool   // in the old / new table's backend set
}

// Delta compares two tables of the same size. A nil table counts as an
// empty one of the other's size (so Delta(nil, t) is the first build).
// It is for the control plane, the simulator and the CLI: it allocates.
func Delta(old, new *MaglevTable) (Diff, error) {
	switch {
	case old == nil && new == nil:
		return Diff{}, nil
	case old == nil:
		old = &MaglevTable{m: new.m}
	case new == nil:
		new = &MaglevTable{m: old.m}
	}
	if old.m != new.m {
		return Diff{}, fmt.Errorf("delta of maglev tables: sizes differ (%d and %d)", old.m, new.m)
	}

	// Merge the two sorted name lists; map each table's index to a row.
	var rows []BackendDiff
	oldRow := make([]int, len(old.backends))
	newRow := make([]int, len(new.backends))
	i, j := 0, 0
	for i < len(old.backends) || j < len(new.backends) {
		c := 0
		switch {
		case i == len(old.backends):
			c = 1
		case j == len(new.backends):
			c = -1
		default:
			c = cmp.Compare(old.backends[i].Name, new.backends[j].Name)
		}
		r := BackendDiff{}
		if c <= 0 {
			r.Name, r.InOld, r.Before = old.backends[i].Name, true, old.counts[i]
			oldRow[i] = len(rows)
			i++
		}
		if c >= 0 {
			r.Name, r.InNew, r.After = new.backends[j].Name, true, new.counts[j]
			newRow[j] = len(rows)
			j++
		}
		rows = append(rows, r)
	}

	// The slots hold IDs, unique within a table: map them to rows.
	rowOf := func(t *MaglevTable, row []int) func(s uint32) int {
		byID := make(map[uint32]int, len(t.backends))
		for i, b := range t.backends {
			byID[b.ID] = row[i]
		}
		return func(s uint32) int {
			id, ok := t.SlotID(s)
			if !ok {
				return -1
			}
			return byID[id]
		}
	}
	oldOf, newOf := rowOf(old, oldRow), rowOf(new, newRow)
	d := Diff{Size: old.m}
	for s := range old.m {
		ro, rn := oldOf(s), newOf(s)
		if ro == rn {
			continue
		}
		d.Changed++
		if ro >= 0 {
			rows[ro].Lost++
			if rows[ro].InNew {
				d.SurvivorMoved++
			}
		}
		if rn >= 0 {
			rows[rn].Gained++
		}
	}
	d.Backends = slices.Clip(rows)
	return d, nil
}
