package daemon

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/handover"
	"github.com/xlbnet/xlb/ring"
)

// The data plane's side of a hand-over (handover.go has the daemon's).
// What crosses: per queue the AF_XDP socket, its UMEM memfd and its
// conntrack arena; the two shared arenas; the BPF objects through their
// pins. What stays: nothing, except this process's mappings and fds,
// which it closes without detaching.

// engineState is the data plane's part of the state document.
type engineState struct {
	Interface string       `json:"interface"`
	Ifindex   int          `json:"ifindex"`
	Queues    []queueState `json:"queues"`
}

type queueState struct {
	ID   int          `json:"id"`
	Ring ring.Options `json:"ring"`
}

// Names of the files handed over.
func xskFile(q int) string  { return fmt.Sprintf("xsk-q%d", q) }
func umemFile(q int) string { return fmt.Sprintf("umem-q%d", q) }
func ctFile(q int) string   { return fmt.Sprintf("ct-q%d", q) }

const (
	sessionsFile  = "ct-sessions"
	fragmentsFile = "ct-fragments"
)

// handoverState describes the engine for the successor.
func (e *engine) handoverState() engineState {
	st := engineState{Interface: e.cfg.Interface, Ifindex: e.ifindex}
	for _, q := range e.queues {
		st.Queues = append(st.Queues, queueState{ID: q.id, Ring: q.sock.Options()})
	}
	return st
}

// handoverFiles lists the fds to hand over (they stay this engine's).
func (e *engine) handoverFiles() []handover.File {
	var fs []handover.File
	for _, q := range e.queues {
		fs = append(fs,
			handover.File{Name: xskFile(q.id), FD: q.sock.FD()},
			handover.File{Name: umemFile(q.id), FD: q.sock.UMEMFD()},
			handover.File{Name: ctFile(q.id), FD: q.table.Arena().FD()})
	}
	return append(fs,
		handover.File{Name: sessionsFile, FD: e.sessions.Arena().FD()},
		handover.File{Name: fragmentsFile, FD: e.frags.Arena().FD()})
}

// quiesce stops every worker at a batch boundary, marks the tables
// stopped, and returns each queue's free frames: what the successor's
// workers start from.
func (e *engine) quiesce() map[int][]uint64 {
	e.stopWorkers()
	free := map[int][]uint64{}
	for _, q := range e.queues {
		free[q.id] = q.sock.Rings().Frames.FreeList()
		q.table.MarkStopped()
	}
	return free
}

// resume restarts the workers after a quiesce whose successor gave up
// before touching anything: rings, frames and tables are as they were.
func (e *engine) resume() {
	for _, q := range e.queues {
		q.table.Resume()
	}
	e.startWorkers()
}

// release closes this process's fds and mappings and leaves the program
// attached and pinned, the sockets bound and the arenas alive in whoever
// else holds them (a successor). Also the clean-up of a successor that
// gave up: it never swapped its program in, so it detaches nothing.
func (e *engine) release() error {
	if e.closed {
		return nil
	}
	e.closed = true
	e.stopWorkers()
	var errs []error
	if e.prog != nil {
		errs = append(errs, e.prog.Release())
	}
	return errors.Join(append(errs, e.closeQueues())...)
}

// rebuild gives the queues new sockets after a successor died after the
// cut-over: it may have moved frames, so the old rings cannot be trusted,
// and it may have swapped its own program in, so the program is opened
// again from the pins. The conntrack tables are kept (recounted). VIP
// packets of a queue between its old socket's close and the new one's
// registration are dropped by the program.
func (e *engine) rebuild() error {
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
		if q.sock, err = ring.Open(ring.Options{Ifindex: e.ifindex, Queue: q.id, Bind: o.Bind}); err != nil {
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

// adoptEngine maps what a predecessor handed over (files taken from
// offer) without disturbing it: its workers keep running until the
// cut-over (takeOver). Tables whose arenas this build cannot read start
// empty, with a note saying why; notes go to the log and to `xlb
// restart`'s answer. On error everything taken is closed, nothing in
// force is changed.
func adoptEngine(cfg engineConfig, st engineState, takeFile func(string) (int, bool), notes *[]string) (_ *engine, err error) {
	l, err := netlink.LinkByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", cfg.Interface, err)
	}
	if cfg.Interface != st.Interface || l.Attrs().Index != st.Ifindex {
		return nil, fmt.Errorf("the running daemon serves %s (ifindex %d), this configuration %s (ifindex %d): an interface change needs xlb stop, then xlb run",
			st.Interface, st.Ifindex, cfg.Interface, l.Attrs().Index)
	}
	var ids []int
	for _, q := range st.Queues {
		ids = append(ids, q.ID)
	}
	if want := cfg.Queues; len(want) > 0 && !slices.Equal(want, ids) {
		return nil, fmt.Errorf("the running daemon serves queues %v, this configuration %v: a queue change needs xlb stop, then xlb run", ids, want)
	}
	e := &engine{cfg: cfg, ifindex: st.Ifindex, holdVIPs: true}
	defer func() {
		if err != nil {
			e.release()
		}
	}()
	take := func(name string) (int, error) {
		fd, ok := takeFile(name)
		if !ok {
			return -1, fmt.Errorf("the running daemon handed over no %s", name)
		}
		return fd, nil
	}
	shared := conntrack.ArenaInfo{ClockBase: cfg.ClockBase, Ifindex: e.ifindex}
	adoptShared := func(name string, entries int, seed uint64) (*conntrack.Shared, error) {
		fd, err := take(name)
		if err != nil {
			return nil, err
		}
		s, err := conntrack.AdoptShared(fd)
		if errors.Is(err, conntrack.ErrArenaLayout) {
			*notes = append(*notes, fmt.Sprintf("%s starts empty: %v", name, err))
			return conntrack.NewSharedInArena(entries, seed, shared)
		}
		return s, err
	}
	if e.sessions, err = adoptShared(sessionsFile, max(cfg.MaxEntries/4, 1024), cfg.Seed^0x5e55); err != nil {
		return nil, err
	}
	if e.frags, err = adoptShared(fragmentsFile, max(cfg.MaxEntries/16, 1024), cfg.Seed^0xf4a6); err != nil {
		return nil, err
	}
	if e.prog, err = e.openProgram(); err != nil {
		return nil, err
	}
	if r := e.prog.Reused(); !r.Link {
		return nil, fmt.Errorf("the running daemon's xdp program is not pinned for %s (%s)", cfg.Interface, r.Reason)
	} else if r.Reason != "" {
		*notes = append(*notes, "xdp maps: "+r.Reason)
	}
	for _, qs := range st.Queues {
		q := &queue{id: qs.ID}
		e.queues = append(e.queues, q)
		xfd, err := take(xskFile(q.id))
		if err != nil {
			return nil, err
		}
		ufd, err := take(umemFile(q.id))
		if err != nil {
			return nil, err
		}
		if q.sock, err = ring.Adopt(xfd, ufd, qs.Ring); err != nil {
			return nil, err
		}
		cfd, err := take(ctFile(q.id))
		if err != nil {
			return nil, err
		}
		q.table, err = conntrack.AdoptTable(cfd)
		if errors.Is(err, conntrack.ErrArenaLayout) {
			*notes = append(*notes, fmt.Sprintf("queue %d conntrack starts empty: %v", q.id, err))
			per := cfg.MaxEntries / len(st.Queues)
			q.table, err = conntrack.NewInArena(per, cfg.Seed+uint64(q.id), conntrack.ArenaInfo{ClockBase: cfg.ClockBase, Ifindex: e.ifindex, Queue: q.id})
		} else if err == nil {
			q.adopted = true
		}
		if err != nil {
			return nil, fmt.Errorf("queue %d: %w", q.id, err)
		}
		e.newWorker(q)
		// New maps (another layout) need the sockets; shared ones have them.
		if !e.prog.Reused().Maps {
			if err := e.prog.Register(q.id, q.sock.FD()); err != nil {
				return nil, fmt.Errorf("queue %d: %w", q.id, err)
			}
		}
	}
	return e, nil
}

// takeOver is the cut-over of an adopted engine: the predecessor's
// workers have stopped and free holds their free frames. It changes
// nothing until the program swap, its last step: an error leaves the
// predecessor able to resume. After it succeeds, begin starts the workers.
func (e *engine) takeOver(free map[int][]uint64) error {
	for _, q := range e.queues {
		if err := q.sock.TakeOver(free[q.id]); err != nil {
			return err
		}
	}
	var err error
	e.mode, err = e.prog.Attach(e.ifindex, e.cfg.XDPMode)
	return err
}

// begin runs an engine taken over: tables resumed, no-socket drops set,
// workers started, the held VIP set published. Errors are logged: the
// engine serves whatever happens here.
func (e *engine) begin() {

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
	if err := e.prog.ReplaceVIPs(e.heldVIPs); err != nil {
		e.cfg.Log.Error("publish vip set after the hand-over", "err", err)
	}
}

// queueTable is queue id's conntrack table: a previous process's arena
// when cfg.Arenas offers one this build can read (recounted and scrubbed:
// that process may have died mid-batch), else a new one.
func (e *engine) queueTable(id, entries int) (*conntrack.Table, error) {
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
func (e *engine) sharedTable(name string, entries int, seed uint64, info conntrack.ArenaInfo) (*conntrack.Shared, error) {
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

// openSocket is ring.Open, retried for a second while the queue is still
// bound by a socket on its way out (one a service manager was just told
// to drop from its fd store).
func openSocket(o ring.Options) (*ring.Socket, error) {
	deadline := time.Now().Add(time.Second)
	for {
		s, err := ring.Open(o)
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return s, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
