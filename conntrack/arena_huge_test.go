package conntrack

import (
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hugeEntries sizes a Table arena of ~9 MiB (16 Ki buckets of 576 B):
// at least four 2 MiB pages whatever the mapping's alignment.
const hugeEntries = 1 << 17

func needShmemTHP(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to set " + ShmemTHPPath)
	}
	if ShmemTHP() == "" {
		t.Skip("kernel without transparent huge pages")
	}
}

// adviseForTest sets shmem THP to advise for the test (AdviseShmemTHP).
func adviseForTest(t *testing.T) {
	t.Helper()
	release, err := AdviseShmemTHP()
	if err != nil {
		t.Skipf("shmem THP: %v", err)
	}
	t.Cleanup(func() {
		if err := release(); err != nil {
			t.Error(err)
		}
	})
}

func fillAndCheck(t *testing.T, tb *Table, n int) {
	t.Helper()
	now := Now(NewMonotonicClock())
	for i := range n {
		k := arenaKey(i)
		if _, ok := tb.Insert(&k, 1, Value{Backend: uint32(i)}, now, TicksOf(60e9), false); !ok {
			t.Fatalf("insert %d failed", i)
		}
	}
	for i := range n {
		k := arenaKey(i)
		if e := tb.Lookup(&k, 1, now, TicksOf(60e9), false); e == nil || e.Backend() != uint32(i) {
			t.Fatalf("lookup %d: %v", i, e)
		}
	}
}

// fillAndAdopt fills tb with 1000 entries, stops it and returns its
// successor's table over a second mapping of the memfd (openArena).
func fillAndAdopt(t *testing.T, tb *Table) *Table {
	t.Helper()
	fillAndCheck(t, tb, 1000)
	tb.MarkStopped()
	succ, err := AdoptTable(dupFD(t, tb.Arena().FD()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { succ.Arena().Close() })
	return succ
}

// TestArenaHugePages: with shmem THP at advise, a Table arena (and the
// Shared one) is mapped by 2 MiB pages, and so is a successor's mapping
// of it (AdoptTable, openArena). Fails when the arena is populated
// before it is advised (MAP_POPULATE): every page is then 4 KiB.
func TestArenaHugePages(t *testing.T) {
	needShmemTHP(t)
	adviseForTest(t)
	tb, err := NewInArena(hugeEntries, 1, ArenaInfo{Queue: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Arena().Close()
	size := int64(len(tb.Arena().mem))
	huge, err := tb.Arena().HugeBytes()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("table arena: %d of %d bytes in huge pages", huge, size)
	if huge < size-4<<20 {
		t.Errorf("table arena of %d bytes: %d in huge pages, want all but the ends", size, huge)
	}
	succ := fillAndAdopt(t, tb)
	shuge, err := succ.Arena().HugeBytes()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("successor's mapping: %d bytes in huge pages", shuge)
	if shuge != huge {
		t.Errorf("successor's mapping: %d bytes in huge pages, the creator's %d", shuge, huge)
	}
	succ.Resume()
	k := arenaKey(7)
	if e := succ.Lookup(&k, 1, Now(NewMonotonicClock()), TicksOf(60e9), false); e == nil || e.Backend() != 7 {
		t.Errorf("successor lookup: %v", e)
	}

	sh, err := NewSharedInArena(hugeEntries, 2, ArenaInfo{})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Arena().Close()
	shh, err := sh.Arena().HugeBytes()
	if err != nil || shh < int64(len(sh.Arena().mem))-4<<20 {
		t.Errorf("shared arena of %d bytes: %d in huge pages (%v)", len(sh.Arena().mem), shh, err)
	}
	// One read of smaps for all three gives what a read for each gave.
	all, err := HugeBytesOf([]*Arena{sh.Arena(), tb.Arena(), succ.Arena()})
	if err != nil || len(all) != 3 || all[0] != shh || all[1] != huge || all[2] != shuge {
		t.Errorf("HugeBytesOf: %v (%v), want [%d %d %d]", all, err, shh, huge, shuge)
	}
}

// TestArenaNoHugePages: with shmem THP at never the arena works on 4 KiB
// pages, and its successor too.
func TestArenaNoHugePages(t *testing.T) {
	needShmemTHP(t)
	setShmemTHPExclusive(t, "never")
	tb, err := NewInArena(hugeEntries, 1, ArenaInfo{Queue: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Arena().Close()
	if h, err := tb.Arena().HugeBytes(); err != nil || h != 0 {
		t.Errorf("arena under never: %d bytes in huge pages (%v)", h, err)
	}
	succ := fillAndAdopt(t, tb)
	succ.Resume()
	if succ.Len() != 1000 {
		t.Errorf("successor holds %d entries, want 1000", succ.Len())
	}
}

// setShmemTHPExclusive sets mode while no AdviseShmemTHP holder needs
// advise (waiting up to a minute for them) and restores it at cleanup.
func setShmemTHPExclusive(t *testing.T, mode string) {
	t.Helper()
	lf, err := os.OpenFile(shmemTHPLock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lf.Close() })
	for deadline := time.Now().Add(time.Minute); unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil; {
		if time.Now().After(deadline) {
			t.Skip("another process holds shmem THP at advise")
		}
		time.Sleep(100 * time.Millisecond)
	}
	prev := ShmemTHP()
	if err := os.WriteFile(ShmemTHPPath, []byte(mode), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(ShmemTHPPath, []byte(prev), 0); err != nil {
			t.Errorf("restore %s to %s: %v", ShmemTHPPath, prev, err)
		}
	})
}

func TestSelectedMode(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"always within_size advise [never] deny force\n", "never"},
		{"[advise] never\n", "advise"},
		{"never\n", "never"},
	} {
		if got := selectedMode(c.in); got != c.want {
			t.Errorf("selectedMode(%q) = %q, want %q", strings.TrimSpace(c.in), got, c.want)
		}
	}
}
