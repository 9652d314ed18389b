package daemon

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/metrics"
)

// The conntrack arenas' pages: logged once when an engine serves, and in
// status and the metrics (xlb_conntrack_arena_bytes) from one reading of
// /proc/self/smaps for all arenas (conntrack.HugeBytesOf) that serves for
// arenaPagesTTL. Reading smaps makes the kernel walk the page tables of
// every mapping it prints. Measured 2026-12-01 on this 2-core machine:
// one reading for 2 × 288 + 2 × 72 MiB of arenas on 4 KiB pages took
// 23-25 ms (one read per arena 100-550 ms: each walks the mappings before
// its own again), for 2 × 72 + 2 × 16 MiB 5 ms, for ~23 MiB on 2 MiB
// pages 0.7 ms (TestArenaPagesReading logs it). An appliance with GiBs of
// tables on 4 KiB pages would so add ~0.1 s to every 1 s watch or
// scrape; huge pages rarely change once an arena is populated, so a
// reading a few seconds old says the same.

// arenaPagesTTL is how long one reading of smaps serves.
const arenaPagesTTL = 5 * time.Second

// namedArena is one conntrack table's arena as status names it.
type namedArena struct {
	table string // queue-N, sessions, fragments
	queue int    // -1: shared
	arena *conntrack.Arena
}

// arenas lists the engine's arenas: each queue's table, then the shared
// session and fragment tables.
func (e *engine) arenas() []namedArena {
	var out []namedArena
	for _, q := range e.queues {
		out = append(out, namedArena{fmt.Sprintf("queue-%d", q.id), q.id, q.table.Arena()})
	}
	return append(out, namedArena{"sessions", -1, e.sessions.Arena()}, namedArena{"fragments", -1, e.frags.Arena()})
}

// arenaReading is one reading of the arenas' pages.
type arenaReading struct {
	stats []control.ArenaStat
	mode  string // shmem THP mode
	err   error  // smaps could not be read: every HugeBytes is -1
}

// readArenaPages reads smaps once for every arena.
func readArenaPages(arenas []namedArena, mode string) arenaReading {
	r := arenaReading{mode: mode, stats: make([]control.ArenaStat, len(arenas))}
	as := make([]*conntrack.Arena, len(arenas))
	for i, a := range arenas {
		as[i] = a.arena
		r.stats[i] = control.ArenaStat{Table: a.table, Queue: a.queue, Bytes: a.arena.Bytes(), HugeBytes: -1}
	}
	huge, err := conntrack.HugeBytesOf(as)
	if err != nil {
		r.err = fmt.Errorf("conntrack arena pages: %w", err)
		return r
	}
	for i := range r.stats {
		r.stats[i].HugeBytes = huge[i]
	}
	return r
}

// arenaPagesCache keeps the last reading for arenaPagesTTL. Safe for
// concurrent use: a status and a scrape at once read smaps once.
type arenaPagesCache struct {
	mu  sync.Mutex
	eng *engine // whose arenas were read (a restart's engine reads anew)
	at  time.Time
	r   arenaReading
}

// arenaPages returns the engine's arena pages as of at most
// arenaPagesTTL ago; the zero reading without an engine.
func (d *daemon) arenaPages() arenaReading {
	e := d.engine
	if e == nil {
		return arenaReading{}
	}
	c := &d.arenaCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.eng != e || time.Since(c.at) >= arenaPagesTTL {
		c.eng, c.at, c.r = e, time.Now(), readArenaPages(e.arenas(), conntrack.ShmemTHP())
	}
	return c.r
}

var mArenaBytes = family("xlb_conntrack_arena_bytes", "Memory of each conntrack table's arena (table: queue-N, sessions, fragments), by the pages that map it (huge: 2 MiB, base: 4 KiB), from /proc/self/smaps at most 5 s old.", metrics.Gauge, "table", "pages")

// collectArenaPages writes xlb_conntrack_arena_bytes; nothing for the
// tables' pages when smaps could not be read.
func collectArenaPages(s metrics.Sink, r arenaReading) {
	if r.err != nil {
		return
	}
	for _, a := range r.stats {
		s.Add(mArenaBytes, float64(a.HugeBytes), a.Table, "huge")
		s.Add(mArenaBytes, float64(a.Bytes-a.HugeBytes), a.Table, "base")
	}
}

// logArenaPages says, once an engine serves (started or taken over), how
// much of the conntrack arenas 2 MiB pages map (from /proc/self/smaps),
// and, when the kernel's shmem THP setting keeps the arenas on 4 KiB
// pages, how to enable them: the page walk is most of what a lookup
// still waits for (conntrack's doc, "Huge pages").
func (e *engine) logArenaPages() {
	logArenaPages(e.cfg.Log, readArenaPages(e.arenas(), conntrack.ShmemTHP()))
}

func logArenaPages(log *slog.Logger, r arenaReading) {
	var size, huge int64
	for _, a := range r.stats {
		size += a.Bytes
		huge += max(a.HugeBytes, 0)
	}
	if r.err != nil {
		log.Warn("conntrack arena pages", "err", r.err)
	}
	log.Info("conntrack arenas", "bytes", size, "huge_page_bytes", huge, "shmem_thp", r.mode)
	if huge == 0 && !conntrack.ShmemTHPAdvised(r.mode) {
		log.Info("conntrack arenas are on 4 KiB pages: the kernel gives shmem no transparent huge pages",
			"setting", conntrack.ShmemTHPPath, "mode", r.mode, "hint", thpHint)
	} else if huge == 0 && size >= 4<<20 {
		log.Info("conntrack arenas are on 4 KiB pages although shmem_thp allows huge ones: arenas kept from a previous process keep its pages until the tables start empty", "shmem_thp", r.mode)
	}
}

// thpHint is how to give the arenas huge pages.
var thpHint = fmt.Sprintf("echo advise > %s before xlb starts (deploy/systemd/xlb.service does)", conntrack.ShmemTHPPath)
