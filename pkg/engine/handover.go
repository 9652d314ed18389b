package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/handover"
	"github.com/xlbnet/xlb/ring"
)

// The engine's side of a hand-over (a successor of xlb restart or
// upgrade, or the next start under systemd, takes it over). What crosses:
// per queue the AF_XDP socket, its UMEM memfd and its conntrack arena;
// the two shared arenas; the BPF objects through their pins; the free
// frame lists of the stopped workers. What stays: nothing, except this
// process's mappings and fds, which it closes without detaching.

// State is the engine's part of the daemon's state document: what a
// successor checks its configuration against and opens the sockets with.
type State struct {
	Interface string       `json:"interface"`
	Ifindex   int          `json:"ifindex"`
	Queues    []QueueState `json:"queues"`
}

// QueueState is one served queue in State.
type QueueState struct {
	ID   int          `json:"id"`
	Ring ring.Options `json:"ring"`
}

// FreeFrames are the stopped workers' free UMEM frames, by queue id:
// what a successor's workers start from (Quiesce, TakeOver).
type FreeFrames = map[int][]uint64

// Names of the files handed over.
func xskFile(q int) string  { return fmt.Sprintf("xsk-q%d", q) }
func umemFile(q int) string { return fmt.Sprintf("umem-q%d", q) }
func ctFile(q int) string   { return fmt.Sprintf("ct-q%d", q) }

const (
	sessionsFile  = "ct-sessions"
	fragmentsFile = "ct-fragments"
)

// State describes the engine for a successor.
func (e *Engine) State() State {
	st := State{Interface: e.cfg.Interface, Ifindex: e.ifindex}
	for _, q := range e.queues {
		st.Queues = append(st.Queues, QueueState{ID: q.id, Ring: q.sock.Options()})
	}
	return st
}

// Files lists every fd a successor takes over, named (they stay this
// engine's): SocketFiles and ArenaFiles.
func (e *Engine) Files() []handover.File {
	var fs []handover.File
	for _, q := range e.queues {
		fs = append(fs,
			handover.File{Name: xskFile(q.id), FD: q.sock.FD()},
			handover.File{Name: umemFile(q.id), FD: q.sock.UMEMFD()},
			handover.File{Name: ctFile(q.id), FD: q.table.Arena().FD()})
	}
	fs = append(fs,
		handover.File{Name: sessionsFile, FD: e.sessions.Arena().FD()},
		handover.File{Name: fragmentsFile, FD: e.frags.Arena().FD()})
	if e.peers != nil {
		fs = append(fs, handover.File{Name: peersFile, FD: e.peers.Arena().FD()})
	}
	return fs
}

// ArenaFiles lists the conntrack arenas' fds (what a start after a crash
// can keep: Config.Arenas offers them back by these names).
func (e *Engine) ArenaFiles() []handover.File {
	return slices.DeleteFunc(e.Files(), func(f handover.File) bool { return !isArenaFile(f.Name) })
}

// SocketFiles lists the sockets' and their UMEMs' fds (what only stopped
// workers can hand over: their rings are in a known state).
func (e *Engine) SocketFiles() []handover.File {
	return slices.DeleteFunc(e.Files(), func(f handover.File) bool { return isArenaFile(f.Name) })
}

func isArenaFile(name string) bool { return len(name) > 3 && name[:3] == "ct-" }

// FileNames names every file Files lists.
func (e *Engine) FileNames() []string {
	names := []string{sessionsFile, fragmentsFile}
	if e.peers != nil {
		names = append(names, peersFile)
	}
	for _, q := range e.queues {
		names = append(names, xskFile(q.id), umemFile(q.id), ctFile(q.id))
	}
	return names
}

// SocketFileNames names the socket and UMEM files of the queues st
// describes (SocketFiles of the engine that wrote it).
func (st State) SocketFileNames() []string {
	var names []string
	for _, q := range st.Queues {
		names = append(names, xskFile(q.ID), umemFile(q.ID))
	}
	return names
}

// Quiesce stops every worker at a batch boundary, marks the tables
// stopped, and returns each queue's free frames: what a successor's
// workers start from. Resume undoes it.
func (e *Engine) Quiesce() FreeFrames {
	e.stopWorkers()
	free := FreeFrames{}
	for _, q := range e.queues {
		free[q.id] = q.sock.Rings().Frames.FreeList()
		q.table.MarkStopped()
	}
	return free
}

// Resume restarts the workers after a Quiesce whose successor gave up
// before touching anything: rings, frames and tables are as they were.
func (e *Engine) Resume() {
	for _, q := range e.queues {
		q.table.Resume()
	}
	e.startWorkers()
}

// Release closes this process's fds and mappings and leaves the program
// attached and pinned, the sockets bound and the arenas alive in whoever
// else holds them (a successor, systemd's fd store). Also the clean-up of
// an adopted engine that gave up: it never swapped its program in, so it
// detaches nothing. Releasing a closed engine does nothing.
func (e *Engine) Release() error { return e.end(false) }

// Rebuild gives the queues new sockets after a successor died after the
// cut-over: it may have moved frames, so the old rings cannot be trusted,
// and it may have swapped its own program in, so the program is opened
// again from the pins. The conntrack tables are kept (recounted). VIP
// packets of a queue between its old socket's close and the new one's
// registration are dropped by the program.
func (e *Engine) Rebuild() error {
	e.stopWorkers()
	if err := e.prog.Release(); err != nil {
		e.cfg.Log.Warn("rebuild: release program", "err", err)
	}
	p, err := e.openProgram()
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	e.prog = p
	if e.mode, err = p.Attach(e.ifindex, e.cfg.XDPMode); err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	for _, q := range e.queues {
		o := q.sock.Options()
		if err := q.sock.Close(); err != nil {
			e.cfg.Log.Warn("rebuild: close socket", "queue", q.id, "err", err)
		}
		if q.sock, err = openSocket(ring.Options{Ifindex: e.ifindex, Queue: q.id, Bind: o.Bind}); err != nil {
			return fmt.Errorf("rebuild queue %d: %w", q.id, err)
		}
		if err := p.Register(q.id, q.sock.FD()); err != nil {
			return fmt.Errorf("rebuild queue %d: %w", q.id, err)
		}
		if err := p.SetNoSocketDrop(q.id, true); err != nil {
			return fmt.Errorf("rebuild queue %d: %w", q.id, err)
		}
		q.table.MarkStopped()
		q.table.Resume()
		e.newWorker(q)
	}
	e.startWorkers()
	return nil
}

// Adopt maps what a predecessor handed over (st, and the files take
// gives by name) without disturbing it: its workers keep running until
// the cut-over (TakeOver), and the VIP set Publish is given is held back
// until Begin. Tables whose arenas this build cannot read start empty,
// with a note saying why; the notes go to the log and to `xlb restart`'s
// answer. On error everything taken is closed and nothing in force is
// changed.
func Adopt(cfg Config, st State, take func(name string) (fd int, ok bool)) (_ *Engine, notes []string, err error) {
	l, err := netlink.LinkByName(cfg.Interface)
	if err != nil {
		return nil, nil, fmt.Errorf("interface %s: %w", cfg.Interface, err)
	}
	if cfg.Interface != st.Interface || l.Attrs().Index != st.Ifindex {
		return nil, nil, fmt.Errorf("the running daemon serves %s (ifindex %d), this configuration %s (ifindex %d): an interface change needs xlb stop, then xlb run",
			st.Interface, st.Ifindex, cfg.Interface, l.Attrs().Index)
	}
	var ids []int
	for _, q := range st.Queues {
		ids = append(ids, q.ID)
	}
	if want := cfg.Queues; len(want) > 0 && !slices.Equal(want, ids) {
		return nil, nil, fmt.Errorf("the running daemon serves queues %v, this configuration %v: a queue change needs xlb stop, then xlb run", ids, want)
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = conntrack.NewSystemClock()
	}
	e := &Engine{cfg: cfg, ifindex: st.Ifindex, holdVIPs: true}
	defer func() {
		if err != nil {
			e.Release()
			notes = nil
		}
	}()
	takeFD := func(name string) (int, error) {
		fd, ok := take(name)
		if !ok {
			return -1, fmt.Errorf("the running daemon handed over no %s", name)
		}
		return fd, nil
	}
	shared := conntrack.ArenaInfo{ClockBase: cfg.ClockBase, Ifindex: e.ifindex}
	adoptShared := func(name string, entries int, seed uint64) (*conntrack.Shared, error) {
		fd, err := takeFD(name)
		if err != nil {
			return nil, err
		}
		s, err := conntrack.AdoptShared(fd)
		if errors.Is(err, conntrack.ErrArenaLayout) {
			notes = append(notes, fmt.Sprintf("%s starts empty: %v", name, err))
			return conntrack.NewSharedInArena(entries, seed, shared)
		}
		return s, err
	}
	if e.sessions, err = adoptShared(sessionsFile, max(cfg.MaxEntries/4, 1024), cfg.Seed^0x5e55); err != nil {
		return nil, nil, err
	}
	if e.frags, err = adoptShared(fragmentsFile, max(cfg.MaxEntries/16, 1024), cfg.Seed^0xf4a6); err != nil {
		return nil, nil, err
	}
	if e.peers, notes, err = e.adoptPeers(take, notes); err != nil {
		return nil, nil, err
	}
	if e.prog, err = e.openProgram(); err != nil {
		return nil, nil, err
	}
	if r := e.prog.Reused(); !r.Link {
		return nil, nil, fmt.Errorf("the running daemon's xdp program is not pinned for %s (%s)", cfg.Interface, r.Reason)
	} else if r.Reason != "" {
		notes = append(notes, "xdp maps: "+r.Reason)
	}
	for _, qs := range st.Queues {
		q := &queue{id: qs.ID}
		e.queues = append(e.queues, q)
		xfd, err := takeFD(xskFile(q.id))
		if err != nil {
			return nil, nil, err
		}
		ufd, err := takeFD(umemFile(q.id))
		if err != nil {
			return nil, nil, err
		}
		if q.sock, err = ring.Adopt(xfd, ufd, qs.Ring); err != nil {
			return nil, nil, err
		}
		cfd, err := takeFD(ctFile(q.id))
		if err != nil {
			return nil, nil, err
		}
		q.table, err = conntrack.AdoptTable(cfd)
		if errors.Is(err, conntrack.ErrArenaLayout) {
			notes = append(notes, fmt.Sprintf("queue %d conntrack starts empty: %v", q.id, err))
			per := cfg.MaxEntries / len(st.Queues)
			q.table, err = conntrack.NewInArena(per, cfg.Seed+uint64(q.id), conntrack.ArenaInfo{ClockBase: cfg.ClockBase, Ifindex: e.ifindex, Queue: q.id})
		} else if err == nil {
			q.adopted = true
		}
		if err != nil {
			return nil, nil, fmt.Errorf("queue %d: %w", q.id, err)
		}
		if err := e.newWorker(q); err != nil {
			return nil, nil, fmt.Errorf("queue %d: %w", q.id, err)
		}
		// New maps (another layout) need the sockets; shared ones have them.
		if !e.prog.Reused().Maps {
			if err := e.prog.Register(q.id, q.sock.FD()); err != nil {
				return nil, nil, fmt.Errorf("queue %d: %w", q.id, err)
			}
		}
	}
	return e, notes, nil
}

// TakeOver is the cut-over of an adopted engine: the predecessor's
// workers have stopped and free holds their free frames. It changes
// nothing until the program swap, its last step: an error leaves the
// predecessor able to resume (the caller then Releases this engine).
// After it succeeds, Begin starts the workers.
func (e *Engine) TakeOver(free FreeFrames) error {
	for _, q := range e.queues {
		if err := q.sock.TakeOver(free[q.id]); err != nil {
			return err
		}
	}
	var err error
	e.mode, err = e.prog.Attach(e.ifindex, e.cfg.XDPMode)
	return err
}

// Begin runs an engine taken over: tables resumed, no-socket drops set,
// workers started, the held VIP set published. Errors are logged: the
// engine serves whatever happens here.
func (e *Engine) Begin() {
	for _, q := range e.queues {
		if q.adopted && !q.table.Resume() {
			e.cfg.Log.Warn("queue's conntrack arena was not stopped cleanly: recounted", "queue", q.id)
		}
		if err := e.prog.SetNoSocketDrop(q.id, true); err != nil {
			e.cfg.Log.Warn("set no-socket action", "queue", q.id, "err", err)
		}
		e.zeroCopy = q.sock.ZeroCopy()
	}
	e.startWorkers()
	e.logArenaPages()
	e.holdVIPs = false
	if err := e.replaceVIPs(e.heldVIPs); err != nil {
		e.cfg.Log.Error("publish vip set after the hand-over", "err", err)
	}
}

// queueTable is queue id's conntrack table: a previous process's arena
// when cfg.Arenas offers one this build can read (recounted and scrubbed:
// that process may have died mid-batch), else a new one.
func (e *Engine) queueTable(id, entries int) (*conntrack.Table, error) {
	info := conntrack.ArenaInfo{ClockBase: e.cfg.ClockBase, Ifindex: e.ifindex, Queue: id}
	if e.cfg.Arenas != nil {
		if fd, ok := e.cfg.Arenas(ctFile(id)); ok {
			t, err := conntrack.AdoptTable(fd)
			if err == nil {
				clean := t.Resume()
				dropped := 0
				if e.cfg.Keep != nil {
					dropped = t.Scrub(e.cfg.Keep)
				}
				e.cfg.Log.Info("conntrack table kept from the previous process", "queue", id, "entries", t.Len(), "clean_stop", clean, "dropped_unknown_slots", dropped)
				return t, nil
			}
			e.cfg.Log.Warn("conntrack table of the previous process not usable; starting empty", "queue", id, "err", err)
		}
	}
	return conntrack.NewInArena(entries, e.cfg.Seed+uint64(id), info)
}

// sharedTable is queueTable's counterpart for the shared tables.
func (e *Engine) sharedTable(name string, entries int, seed uint64, info conntrack.ArenaInfo) (*conntrack.Shared, error) {
	if e.cfg.Arenas != nil {
		if fd, ok := e.cfg.Arenas(name); ok {
			s, err := conntrack.AdoptShared(fd)
			if err == nil {
				dropped := 0
				if e.cfg.Keep != nil {
					dropped = s.Repair(e.cfg.Keep)
				}
				e.cfg.Log.Info("shared conntrack table kept from the previous process", "table", name, "dropped_unknown_slots", dropped)
				return s, nil
			}
			e.cfg.Log.Warn("shared conntrack table of the previous process not usable; starting empty", "table", name, "err", err)
		}
	}
	return conntrack.NewSharedInArena(entries, seed, info)
}

// openSocket is ring.Open, retried for up to socketReleaseWait while the
// queue is still bound by a socket on its way out: one a service manager
// was just told to drop from its fd store, a crashed process's, or the
// one Rebuild just closed. The kernel frees the queue only after the
// socket's last reference is gone, from a work queue that takes the RTNL
// lock (xp_release_deferred), so the wait is the machine's: a start right
// after a kill -9 found the queue still bound after the 1 s this waited
// before (load 27).
func openSocket(o ring.Options) (*ring.Socket, error) {
	start := time.Now()
	for {
		s, err := ring.Open(o)
		if err == nil || !errors.Is(err, unix.EBUSY) {
			return s, err
		}
		if time.Since(start) > socketReleaseWait {
			return s, fmt.Errorf("%w (the queue was still bound after %v)", err, socketReleaseWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// socketReleaseWait bounds openSocket's wait for a released queue: a
// queue another live socket holds fails after it.
const socketReleaseWait = 10 * time.Second
