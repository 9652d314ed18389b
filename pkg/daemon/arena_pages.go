package daemon

import (
	"fmt"
	"log/slog"

	"github.com/xlbnet/xlb/conntrack"
)

// logArenaPages says, once an engine serves (started or taken over), how
// much of the conntrack arenas 2 MiB pages map (from /proc/self/smaps),
// and, when the kernel's shmem THP setting keeps the arenas on 4 KiB
// pages, how to enable them: the page walk is most of what a lookup
// still waits for (conntrack's doc, "Huge pages").
func (e *engine) logArenaPages() {
	arenas := map[string]*conntrack.Arena{sessionsFile: e.sessions.Arena(), fragmentsFile: e.frags.Arena()}
	for _, q := range e.queues {
		arenas[ctFile(q.id)] = q.table.Arena()
	}
	logArenaPages(e.cfg.Log, arenas, conntrack.ShmemTHP())
}

func logArenaPages(log *slog.Logger, arenas map[string]*conntrack.Arena, mode string) {
	var size, huge int64
	for name, a := range arenas {
		if a == nil {
			continue
		}
		size += a.Bytes()
		h, err := a.HugeBytes()
		if err != nil {
			log.Warn("conntrack arena pages", "arena", name, "err", err)
			continue
		}
		huge += h
	}
	log.Info("conntrack arenas", "bytes", size, "huge_page_bytes", huge, "shmem_thp", mode)
	if huge == 0 && !conntrack.ShmemTHPAdvised(mode) {
		log.Info("conntrack arenas are on 4 KiB pages: the kernel gives shmem no transparent huge pages",
			"setting", conntrack.ShmemTHPPath, "mode", mode,
			"hint", fmt.Sprintf("echo advise > %s before xlb starts (deploy/systemd/xlb.service does)", conntrack.ShmemTHPPath))
	} else if huge == 0 && size >= 4<<20 {
		log.Info("conntrack arenas are on 4 KiB pages although shmem_thp allows huge ones: arenas kept from a previous process keep its pages until the tables start empty", "shmem_thp", mode)
	}
}
