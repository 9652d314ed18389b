package engine

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/conntrack"
)

// testArenas is an engine with the arenas of two queue tables of
// entries slots each and the two shared tables, closed at the end.
func testArenas(t *testing.T, entries int) *Engine {
	t.Helper()
	e := &Engine{}
	for q := range 2 {
		tb, err := conntrack.NewInArena(entries, 1, conntrack.ArenaInfo{Queue: q})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tb.Arena().Close() })
		e.queues = append(e.queues, &queue{id: q, table: tb})
	}
	for _, s := range []**conntrack.Shared{&e.sessions, &e.frags} {
		sh, err := conntrack.NewSharedInArena(entries/4, 2, conntrack.ArenaInfo{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sh.Arena().Close() })
		*s = sh
	}
	return e
}

// TestLogArenaPages: the start-up line reports the arenas' bytes and the
// bytes huge pages map (as smaps says), and the hint to set advise comes
// exactly when the arenas got none under a mode that gives none.
func TestLogArenaPages(t *testing.T) {
	e := testArenas(t, 1<<17)
	r := readArenaPages(e.arenas(), "")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	var size, huge int64
	for _, a := range r.Arenas {
		size, huge = size+a.Bytes, huge+a.HugeBytes
	}
	for _, mode := range []string{"never", "advise"} {
		var buf bytes.Buffer
		r.Mode = mode
		logArenaPages(slog.New(slog.NewTextHandler(&buf, nil)), r)
		out := buf.String()
		want := fmt.Sprintf("msg=\"conntrack arenas\" bytes=%d huge_page_bytes=%d shmem_thp=%s", size, huge, mode)
		if !strings.Contains(out, want) {
			t.Errorf("mode %s: log lacks %q:\n%s", mode, want, out)
		}
		hint := strings.Contains(out, "echo advise > "+conntrack.ShmemTHPPath)
		if wantHint := huge == 0 && mode == "never"; hint != wantHint {
			t.Errorf("mode %s, %d huge bytes: hint %v, want %v:\n%s", mode, huge, hint, wantHint, out)
		}
	}
}

// TestArenaPagesReading: with shmem THP at advise (as root), status's
// reading names every arena (each queue's, then sessions and fragments)
// with its size and the bytes 2 MiB pages map — all but a partial 2 MiB
// at the end — as Arena.HugeBytes reads them one by one (the metric
// carries the same split: TestArenaBytesMetric in pkg/daemon); the
// engine reads smaps once per arenaPagesTTL. It logs what a reading
// costs on 4 KiB pages and on huge ones.
func TestArenaPagesReading(t *testing.T) {
	if os.Geteuid() != 0 || conntrack.ShmemTHP() == "" {
		t.Skip("needs root and a kernel with transparent huge pages to set shmem THP to advise")
	}
	release, err := conntrack.AdviseShmemTHP()
	if err != nil {
		t.Skipf("shmem THP: %v", err)
	}
	t.Cleanup(func() {
		if err := release(); err != nil {
			t.Error(err)
		}
	})
	e := testArenas(t, 1<<17) // 9 MiB per queue table
	r := e.ArenaPages()
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Mode != conntrack.ShmemTHP() || !conntrack.ShmemTHPAdvised(r.Mode) {
		t.Errorf("mode %q, kernel %q", r.Mode, conntrack.ShmemTHP())
	}
	want := []string{"queue-0", "queue-1", "sessions", "fragments"}
	if len(r.Arenas) != len(want) {
		t.Fatalf("%d arenas, want %v: %+v", len(r.Arenas), want, r.Arenas)
	}
	for i, a := range r.Arenas {
		na := e.arenas()[i]
		one, err := na.arena.HugeBytes()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s (queue %d): %d of %d bytes in huge pages", a.Table, a.Queue, a.HugeBytes, a.Bytes)
		if a.Table != want[i] || a.Queue != na.queue || a.Bytes != na.arena.Bytes() || a.HugeBytes != one {
			t.Errorf("arena %d: %+v, want %s of %d bytes, %d huge", i, a, want[i], na.arena.Bytes(), one)
		}
		if a.HugeBytes < a.Bytes-2<<20 || a.HugeBytes%(2<<20) != 0 {
			t.Errorf("%s: %d of %d bytes in huge pages under advise, want every whole 2 MiB", a.Table, a.HugeBytes, a.Bytes)
		}
	}

	// The cache: a second reading within the TTL is the first; one past
	// it reads smaps again.
	at := e.pages.at
	e.ArenaPages()
	if e.pages.at != at {
		t.Error("smaps read again within arenaPagesTTL")
	}
	e.pages.at = at.Add(-arenaPagesTTL)
	e.ArenaPages()
	if !e.pages.at.After(at) {
		t.Error("smaps not read again after arenaPagesTTL")
	}

	start := time.Now()
	readArenaPages(e.arenas(), "")
	t.Logf("one reading of smaps for these arenas: %v", time.Since(start))
}
