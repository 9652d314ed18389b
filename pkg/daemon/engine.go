package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/ring"
	"github.com/xlbnet/xlb/ring/xsk"
)

// engineConfig configures the data plane of one appliance.
type engineConfig struct {
	Interface string
	// Queues lists the receive queues to serve; empty means every RX
	// queue of the interface.
	Queues     []int
	XDPMode    xsk.AttachMode
	Bind       ring.BindMode
	MaxEntries int // conntrack entries for the whole appliance, split over queues
	// SharedEntries sizes the PER_SESSION session table and the fragment
	// table (each); 0 = MaxEntries/4 and MaxEntries/16.
	SessionEntries, FragmentEntries int
	Seed                            uint64 // conntrack bucket seed (random per appliance)
	Clock                           conntrack.Clock
	Log                             *slog.Logger
}

// queue is one served queue: its socket, tables and worker.
type queue struct {
	id     int
	sock   *ring.Socket
	table  *conntrack.Table
	worker *dataplane.Worker
}

// engine is the data plane: the XDP program attached to the interface,
// one AF_XDP socket and one worker goroutine per queue (each locked to its
// OS thread), the conntrack tables, and the snapshot the workers read.
type engine struct {
	cfg      engineConfig
	prog     *xsk.Program
	mode     xsk.AttachMode
	ifindex  int
	queues   []*queue
	snapshot atomic.Pointer[dataplane.Snapshot]
	sessions *conntrack.Shared
	frags    *conntrack.Shared
	zeroCopy bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startEngine loads and attaches the XDP program, opens a socket per queue
// and starts the workers. Until Publish, workers drop VIP traffic
// (no-rule) and the program redirects nothing (its VIP set is empty).
func startEngine(cfg engineConfig) (_ *engine, err error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = conntrack.NewSystemClock()
	}
	l, err := netlink.LinkByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", cfg.Interface, err)
	}
	e := &engine{cfg: cfg, ifindex: l.Attrs().Index}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	qs := cfg.Queues
	if len(qs) == 0 {
		n := l.Attrs().NumRxQueues
		if n < 1 {
			n = 1
		}
		for i := range n {
			qs = append(qs, i)
		}
	}
	if cfg.MaxEntries < len(qs) {
		return nil, fmt.Errorf("conntrack max_entries %d is less than one per queue (%d queues)", cfg.MaxEntries, len(qs))
	}
	if cfg.SessionEntries == 0 {
		cfg.SessionEntries = max(cfg.MaxEntries/4, 1024)
	}
	if cfg.FragmentEntries == 0 {
		cfg.FragmentEntries = max(cfg.MaxEntries/16, 1024)
	}
	if e.sessions, err = conntrack.NewShared(cfg.SessionEntries, cfg.Seed^0x5e55); err != nil {
		return nil, err
	}
	if e.frags, err = conntrack.NewShared(cfg.FragmentEntries, cfg.Seed^0xf4a6); err != nil {
		return nil, err
	}
	if e.prog, err = xsk.Load(); err != nil {
		return nil, err
	}
	if e.mode, err = e.prog.Attach(e.ifindex, cfg.XDPMode); err != nil {
		return nil, err
	}
	cfg.Log.Info("xdp program attached", "interface", cfg.Interface, "mode", e.mode.String())
	per := cfg.MaxEntries / len(qs)
	for _, id := range qs {
		sock, err := ring.Open(ring.Options{Ifindex: e.ifindex, Queue: id, Bind: cfg.Bind})
		if err != nil {
			return nil, fmt.Errorf("queue %d: %w", id, err)
		}
		q := &queue{id: id, sock: sock}
		e.queues = append(e.queues, q)
		if q.table, err = conntrack.New(per, cfg.Seed+uint64(id)); err != nil {
			return nil, fmt.Errorf("queue %d: %w", id, err)
		}
		tables := dataplane.FlowTables{Conntrack: q.table, Sessions: e.sessions, Fragments: e.frags}
		q.worker = dataplane.NewWorker(sock.Rings(), &e.snapshot, tables, cfg.Clock, func() { sock.Poll(1) })
		if err := e.prog.Register(id, sock.FD()); err != nil {
			return nil, fmt.Errorf("queue %d: %w", id, err)
		}
		e.zeroCopy = sock.ZeroCopy()
		cfg.Log.Info("queue bound", "queue", id, "zerocopy", sock.ZeroCopy(), "conntrack_entries", q.table.Cap())
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	cpus := runtime.NumCPU()
	for i, q := range e.queues {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			// Pin queue i to CPU i (mod the CPUs we have): the worker and
			// its queue's interrupt handling then share a cache.
			var set unix.CPUSet
			set.Set(i % cpus)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				cfg.Log.Warn("pin worker to cpu", "queue", q.id, "err", err)
			}
			q.worker.Run(ctx)
		}()
	}
	return e, nil
}

// Mode is the XDP attach mode the interface got.
func (e *engine) Mode() xsk.AttachMode { return e.mode }

// ZeroCopy reports whether the sockets are in zero-copy mode.
func (e *engine) ZeroCopy() bool { return e.zeroCopy }

// Queues returns the served queue ids.
func (e *engine) Queues() []int {
	ids := make([]int, len(e.queues))
	for i, q := range e.queues {
		ids[i] = q.id
	}
	return ids
}

// Publish makes s the snapshot every worker reads from its next batch on,
// and makes the XDP program redirect exactly vips. The program learns new
// VIPs before the workers could need them and forgets old ones after.
func (e *engine) Publish(s *dataplane.Snapshot, vips []xsk.VIP) error {
	e.snapshot.Store(s)
	if err := e.prog.ReplaceVIPs(vips); err != nil {
		return fmt.Errorf("publish vip set: %w", err)
	}
	return nil
}

// Snapshot returns the snapshot the workers read.
func (e *engine) Snapshot() *dataplane.Snapshot { return e.snapshot.Load() }

// queueStats is what engine.Stats reports per queue.
type queueStats struct {
	Queue     int
	Counters  *dataplane.Counters
	Backends  *dataplane.BackendStats // packets per rule and backend slot
	Conntrack *conntrack.Control
	Kernel    ring.Stats
}

// Stats returns per-queue counters; safe from any goroutine.
func (e *engine) Stats() []queueStats {
	out := make([]queueStats, len(e.queues))
	for i, q := range e.queues {
		ks, _ := q.sock.Stats()
		out[i] = queueStats{Queue: q.id, Counters: &q.worker.Counters, Backends: &q.worker.Backends, Conntrack: q.table.Control(), Kernel: ks}
	}
	return out
}

// Shared returns the shared session and fragment tables.
func (e *engine) Shared() (sessions, fragments *conntrack.Shared) { return e.sessions, e.frags }

// Close stops the workers, detaches the program and closes the sockets.
func (e *engine) Close() error {
	if e.cancel != nil {
		e.cancel()
	}
	e.wg.Wait()
	var errs []error
	if e.prog != nil {
		for _, q := range e.queues {
			_ = e.prog.Unregister(q.id)
		}
		errs = append(errs, e.prog.Close())
	}
	for _, q := range e.queues {
		if q.sock != nil {
			errs = append(errs, q.sock.Close())
		}
	}
	return errors.Join(errs...)
}

// backendStats returns every worker's per-backend packet counters.
func (e *engine) backendStats() []*dataplane.BackendStats {
	var out []*dataplane.BackendStats
	for _, q := range e.Stats() {
		if q.Backends != nil {
			out = append(out, q.Backends)
		}
	}
	return out
}

// snapshotOrNil is Snapshot for an engine that may not have started.
func (e *engine) snapshotOrNil() *dataplane.Snapshot {
	if e == nil {
		return nil
	}
	return e.Snapshot()
}
