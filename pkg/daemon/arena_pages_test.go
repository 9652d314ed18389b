package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/metrics"
)

// testArenas is an engine with the arenas of two queue tables of
// entries slots each and the two shared tables, closed at the end.
func testArenas(t *testing.T, entries int) *engine {
	t.Helper()
	e := &engine{}
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
	if r.err != nil {
		t.Fatal(r.err)
	}
	var size, huge int64
	for _, a := range r.stats {
		size, huge = size+a.Bytes, huge+a.HugeBytes
	}
	for _, mode := range []string{"never", "advise"} {
		var buf bytes.Buffer
		r.mode = mode
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
// at the end — as Arena.HugeBytes reads them one by one; the metric
// carries the same split (huge + base = the arena) and passes the
// linter; the daemon reads smaps once per arenaPagesTTL. It logs what a
// reading costs on 4 KiB pages and on huge ones.
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
	d := &daemon{engine: e}
	r := d.arenaPages()
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.mode != conntrack.ShmemTHP() || !conntrack.ShmemTHPAdvised(r.mode) {
		t.Errorf("mode %q, kernel %q", r.mode, conntrack.ShmemTHP())
	}
	want := []string{"queue-0", "queue-1", "sessions", "fragments"}
	if len(r.stats) != len(want) {
		t.Fatalf("%d arenas, want %v: %+v", len(r.stats), want, r.stats)
	}
	for i, a := range r.stats {
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

	reg, err := metrics.NewRegistry(metrics.NewCollector([]*metrics.Family{mArenaBytes}, func(s metrics.Sink) { collectArenaPages(s, d.arenaPages()) }))
	if err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg, "xlb_conntrack_arena_bytes")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	var exp strings.Builder
	exp.WriteString("# HELP xlb_conntrack_arena_bytes " + mArenaBytes.Help + "\n# TYPE xlb_conntrack_arena_bytes gauge\n")
	for _, a := range r.stats {
		fmt.Fprintf(&exp, "xlb_conntrack_arena_bytes{pages=\"base\",table=%q} %d\n", a.Table, a.Bytes-a.HugeBytes)
		fmt.Fprintf(&exp, "xlb_conntrack_arena_bytes{pages=\"huge\",table=%q} %d\n", a.Table, a.HugeBytes)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(exp.String()), "xlb_conntrack_arena_bytes"); err != nil {
		t.Error(err)
	}

	// The cache: a second reading within the TTL is the first; one past
	// it reads smaps again.
	at := d.arenaCache.at
	d.arenaPages()
	if d.arenaCache.at != at {
		t.Error("smaps read again within arenaPagesTTL")
	}
	d.arenaCache.at = at.Add(-arenaPagesTTL)
	d.arenaPages()
	if !d.arenaCache.at.After(at) {
		t.Error("smaps not read again after arenaPagesTTL")
	}

	start := time.Now()
	readArenaPages(e.arenas(), "")
	t.Logf("one reading of smaps for these arenas: %v", time.Since(start))
}
