package daemon

import (
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/engine"
	"github.com/xlbnet/xlb/pkg/metrics"
)

// The conntrack arenas' pages, as the engine reads them (at most 5 s
// old: pkg/engine arenas.go), in status and xlb_conntrack_arena_bytes.

// arenaPages returns the engine's arena pages; the zero reading without
// an engine.
func (d *daemon) arenaPages() engine.ArenaPages {
	if d.engine == nil {
		return engine.ArenaPages{}
	}
	return d.engine.ArenaPages()
}

// arenaStats is a reading as status shows it.
func arenaStats(r engine.ArenaPages) []control.ArenaStat {
	out := make([]control.ArenaStat, len(r.Arenas))
	for i, a := range r.Arenas {
		out[i] = control.ArenaStat(a)
	}
	return out
}

var mArenaBytes = family("xlb_conntrack_arena_bytes", "Memory of each conntrack table's arena (table: queue-N, sessions, fragments), by the pages that map it (huge: 2 MiB, base: 4 KiB), from /proc/self/smaps at most 5 s old.", metrics.Gauge, "table", "pages")

// collectArenaPages writes xlb_conntrack_arena_bytes; nothing for the
// tables' pages when smaps could not be read.
func collectArenaPages(s metrics.Sink, r engine.ArenaPages) {
	if r.Err != nil {
		return
	}
	for _, a := range r.Arenas {
		s.Add(mArenaBytes, float64(a.HugeBytes), a.Table, "huge")
		s.Add(mArenaBytes, float64(a.Bytes-a.HugeBytes), a.Table, "base")
	}
}
