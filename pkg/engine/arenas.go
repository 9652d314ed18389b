package engine

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/xlbnet/xlb/conntrack"
)

// The conntrack arenas' pages: logged once when an engine serves (Start,
// Begin), and read for status and metrics (ArenaPages) from one reading
// of /proc/self/smaps for all arenas (conntrack.HugeBytesOf) that serves
// for arenaPagesTTL. Reading smaps makes the kernel walk the page tables
// of every mapping it prints, so an appliance with GiBs of tables on
// 4 KiB pages would add ~0.1 s to every 1 s watch or scrape
// (bench/README.md has the measurements); huge pages rarely change once
// an arena is populated, so a reading a few seconds old says the same.

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
func (e *Engine) arenas() []namedArena {
	var out []namedArena
	for _, q := range e.queues {
		out = append(out, namedArena{fmt.Sprintf("queue-%d", q.id), q.id, q.table.Arena()})
	}
	return append(out, namedArena{"sessions", -1, e.sessions.Arena()}, namedArena{"fragments", -1, e.frags.Arena()})
}

// ArenaUse is one conntrack table's arena and the bytes huge pages map of
// it.
type ArenaUse struct {
	Table     string // queue-N, sessions or fragments
	Queue     int    // -1: a shared table
	Bytes     int64
	HugeBytes int64 // -1: smaps could not be read (ArenaPages.Err says why)
}

// ArenaPages is one reading of the arenas' pages.
type ArenaPages struct {
	Arenas []ArenaUse // each queue's table, then sessions and fragments
	Mode   string     // the kernel's shmem THP mode
	Err    error      // smaps could not be read: every HugeBytes is -1
}

// readArenaPages reads smaps once for every arena.
func readArenaPages(arenas []namedArena, mode string) ArenaPages {
	r := ArenaPages{Mode: mode, Arenas: make([]ArenaUse, len(arenas))}
	as := make([]*conntrack.Arena, len(arenas))
	for i, a := range arenas {
		as[i] = a.arena
		r.Arenas[i] = ArenaUse{Table: a.table, Queue: a.queue, Bytes: a.arena.Bytes(), HugeBytes: -1}
	}
	huge, err := conntrack.HugeBytesOf(as)
	if err != nil {
		r.Err = fmt.Errorf("conntrack arena pages: %w", err)
		return r
	}
	for i := range r.Arenas {
		r.Arenas[i].HugeBytes = huge[i]
	}
	return r
}

// arenaPagesCache keeps the last reading for arenaPagesTTL. Safe for
// concurrent use: a status and a scrape at once read smaps once.
type arenaPagesCache struct {
	mu sync.Mutex
	at time.Time
	r  ArenaPages
}

// ArenaPages returns the arenas' pages as of at most 5 s ago. Safe from
// any goroutine.
func (e *Engine) ArenaPages() ArenaPages {
	c := &e.pages
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= arenaPagesTTL {
		c.at, c.r = time.Now(), readArenaPages(e.arenas(), conntrack.ShmemTHP())
	}
	return c.r
}

// logArenaPages says, once the engine serves (started or taken over), how
// much of the conntrack arenas 2 MiB pages map (from /proc/self/smaps),
// and, when the kernel's shmem THP setting keeps the arenas on 4 KiB
// pages, how to enable them: the page walk is most of what a lookup
// still waits for (conntrack's doc, "Huge pages").
func (e *Engine) logArenaPages() {
	logArenaPages(e.cfg.Log, readArenaPages(e.arenas(), conntrack.ShmemTHP()))
}

func logArenaPages(log *slog.Logger, r ArenaPages) {
	var size, huge int64
	for _, a := range r.Arenas {
		size += a.Bytes
		huge += max(a.HugeBytes, 0)
	}
	if r.Err != nil {
		log.Warn("conntrack arena pages", "err", r.Err)
	}
	log.Info("conntrack arenas", "bytes", size, "huge_page_bytes", huge, "shmem_thp", r.Mode)
	if huge == 0 && !conntrack.ShmemTHPAdvised(r.Mode) {
		log.Info("conntrack arenas are on 4 KiB pages: the kernel gives shmem no transparent huge pages",
			"setting", conntrack.ShmemTHPPath, "mode", r.Mode, "hint", thpHint)
	} else if huge == 0 && size >= 4<<20 {
		log.Info("conntrack arenas are on 4 KiB pages although shmem_thp allows huge ones: arenas kept from a previous process keep its pages until the tables start empty", "shmem_thp", r.Mode)
	}
}

// thpHint is how to give the arenas huge pages.
var thpHint = fmt.Sprintf("echo advise > %s before xlb starts (deploy/systemd/xlb.service does)", conntrack.ShmemTHPPath)
