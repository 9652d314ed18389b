package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/capture"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/ethtool"
	"github.com/xlbnet/xlb/pkg/spsc"
	"github.com/xlbnet/xlb/ring"
	"github.com/xlbnet/xlb/ring/xsk"
)

// AttachMode is how the XDP program attaches to the interface (the
// program's own type: a configuration value passes through unchanged).
type AttachMode = xsk.AttachMode

// The attach modes.
const (
	AttachAuto    = xsk.AttachAuto    // native, else generic
	AttachNative  = xsk.AttachNative  // the driver's mode, or fail
	AttachGeneric = xsk.AttachGeneric // the kernel's SKB mode
)

// BindMode is how the AF_XDP sockets bind (the socket layer's own type).
type BindMode = ring.BindMode

// The bind modes.
const (
	BindAuto     = ring.BindAuto     // zero-copy, else copy
	BindZeroCopy = ring.BindZeroCopy // zero-copy, or fail
	BindCopy     = ring.BindCopy     // copy mode
)

// VIP is one entry of the set of packets the XDP program hands to the
// workers: those to Addr with IP protocol Proto and destination port
// Port. Proto 0 is every protocol (an L3_DEFAULT rule), Port 0 every port.
type VIP struct {
	Addr  netip.Addr
	Proto uint8
	Port  uint16
}

// Config configures the engine of one appliance.
type Config struct {
	Interface string
	// Queues lists the receive queues to serve; empty means every active
	// RX queue of the interface.
	Queues     []int
	XDPMode    AttachMode
	Bind       BindMode
	MaxEntries int // conntrack entries for the whole appliance, split over queues
	// SessionEntries and FragmentEntries size the PER_SESSION session
	// table and the fragment table; 0 = MaxEntries/4 and MaxEntries/16.
	SessionEntries, FragmentEntries int
	Seed                            uint64 // conntrack bucket seed (random per appliance)
	Clock                           conntrack.Clock
	Log                             *slog.Logger
	// PinDir is the pin root (config pin_dir): the program's link and
	// maps are pinned in PinDir/<interface> (xsk.PinDir) and outlive the
	// process. "" loads an unpinned program, detached when the engine ends.
	PinDir string
	// ClockBase is the CLOCK_MONOTONIC value of Clock's zero, recorded in
	// the conntrack arenas' headers.
	ClockBase int64
	// Arenas, when set, offers conntrack arenas a previous process left
	// (systemd's fd store after a crash) by file name (ArenaFileNames):
	// adopted, recounted and scrubbed with Keep (entries naming unknown
	// slots go) before a worker runs.
	Arenas func(name string) (fd int, ok bool)
	Keep   func(rule uint16, backend uint32) bool
	// Flood defences of every queue's table (conntrack/limit.go).
	NewEntriesPerSecond, NewEntriesBurst int
	UnconfirmedIdle                      time.Duration
	// WorkerNice is the workers' nice value (config worker_nice); 0
	// leaves them at the process's.
	WorkerNice int
	// PeerEntries sizes the table of the exceptions fleet peers send
	// (config [fleet] max_exceptions); 0: no fleet sharing, no table.
	// With it every worker consults the table on a miss and scans its own
	// table for exceptions every ExceptionRefresh (fleet.go).
	PeerEntries      int
	ExceptionRefresh time.Duration
	// BusyPoll > 0 turns preferred busy polling on for every queue's
	// socket, each call spinning up to BusyPoll and handling up to
	// BusyPollBudget packets (config busy_poll, busy_poll_budget); 0, the
	// default, is off (docs/design.md#busy-polling).
	BusyPoll       time.Duration
	BusyPollBudget int
}

// queue is one served queue: its socket, tables and worker.
type queue struct {
	id      int
	sock    *ring.Socket
	table   *conntrack.Table
	worker  *dataplane.Worker
	adopted bool // table handed over by a predecessor, to Resume at the cut-over
	// outbox is the worker's hand-off ring to the fleet node (fleet.go);
	// nil without Config.PeerEntries. It outlives a Rebuild's new worker.
	outbox *spsc.Ring[dataplane.Sighting]
}

// Engine is the data plane: the XDP program attached to the interface,
// one AF_XDP socket and one worker goroutine per queue (each locked to its
// OS thread), the conntrack tables, and the snapshot the workers read.
// Its methods are for one goroutine (the daemon's control goroutine),
// except those that say they are safe from any.
type Engine struct {
	cfg      Config
	prog     *xsk.Program
	mode     AttachMode
	ifindex  int
	queues   []*queue
	snapshot atomic.Pointer[dataplane.Snapshot]
	sessions *conntrack.Shared
	frags    *conntrack.Shared
	peers    *conntrack.Shared // fleet.go; nil without Config.PeerEntries
	// peersAdopted: the peer table is a predecessor's (fleet.go).
	peersAdopted bool
	zeroCopy     bool

	cancel context.CancelFunc // stops the running workers; nil when none run
	wg     sync.WaitGroup
	procs  int // the Ps added for the running workers (procs.go)
	closed bool

	// An adopted engine prepares with the VIP set of its snapshot held
	// back until its workers run (Begin).
	holdVIPs bool
	heldVIPs []VIP

	pages arenaPagesCache // arenas.go
}

// Start loads the XDP program while it opens a socket per queue, then
// attaches the program, registers the sockets and starts the workers. Until Publish, workers drop VIP traffic (no-rule)
// and the program redirects nothing (its VIP set is empty).
func Start(cfg Config) (_ *Engine, err error) {
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
	e := &Engine{cfg: cfg, ifindex: l.Attrs().Index}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	qs, err := servedQueues(cfg.Interface, cfg.Queues)
	if err != nil {
		return nil, err
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
	// The program's load (its maps and the kernel's verifier, about
	// 100 ms) runs beside the arenas and the sockets, which do not need
	// it; it is attached once they are ready, and the sockets registered
	// after that.
	loaded := make(chan error, 1)
	go func() {
		var err error
		e.prog, err = e.openProgram()
		loaded <- err
	}()
	waited := false
	waitProgram := func() error {
		waited = true
		return <-loaded
	}
	defer func() { // before the deferred Close, which closes the program too
		if !waited {
			_ = waitProgram()
		}
	}()
	shared := conntrack.ArenaInfo{ClockBase: cfg.ClockBase, Ifindex: e.ifindex}
	if e.sessions, err = e.sharedTable(sessionsFile, cfg.SessionEntries, cfg.Seed^0x5e55, shared); err != nil {
		return nil, err
	}
	if e.frags, err = e.sharedTable(fragmentsFile, cfg.FragmentEntries, cfg.Seed^0xf4a6, shared); err != nil {
		return nil, err
	}
	if cfg.PeerEntries > 0 {
		if e.peers, err = e.sharedTable(peersFile, cfg.PeerEntries, cfg.Seed^0xf1ee, shared); err != nil {
			return nil, err
		}
	}
	per := cfg.MaxEntries / len(qs)
	for _, id := range qs {
		sock, err := openSocket(ring.Options{Ifindex: e.ifindex, Queue: id, Bind: cfg.Bind})
		if err != nil {
			return nil, fmt.Errorf("queue %d: %w", id, err)
		}
		q := &queue{id: id, sock: sock}
		e.queues = append(e.queues, q)
		if q.table, err = e.queueTable(id, per); err != nil {
			return nil, fmt.Errorf("queue %d: %w", id, err)
		}
		if err := e.newWorker(q); err != nil {
			return nil, fmt.Errorf("queue %d: %w", id, err)
		}
	}
	if err := waitProgram(); err != nil {
		return nil, err
	}
	if e.mode, err = e.prog.Attach(e.ifindex, cfg.XDPMode); err != nil {
		return nil, err
	}
	cfg.Log.Info("xdp program attached", "interface", cfg.Interface, "mode", e.mode.String())
	if why := e.prog.NativeRefused(); why != nil {
		cfg.Log.Warn("native XDP refused: running in generic mode", "interface", cfg.Interface, "reason", why.Error(), "hint", nativeHint(l.Attrs().MTU))
	}
	for _, q := range e.queues {
		id, sock := q.id, q.sock
		if err := e.prog.Register(id, sock.FD()); err != nil {
			return nil, fmt.Errorf("queue %d: %w", id, err)
		}
		// From now on a VIP packet of this queue that finds no socket
		// (between two owners) is dropped, not handed to the kernel.
		if err := e.prog.SetNoSocketDrop(id, true); err != nil {
			return nil, fmt.Errorf("queue %d: %w", id, err)
		}
		e.zeroCopy = sock.ZeroCopy()
		bound := []any{"queue", id, "zerocopy", sock.ZeroCopy(), "conntrack_entries", q.table.Cap()}
		if cfg.BusyPoll > 0 {
			bound = append(bound, "busy_poll", cfg.BusyPoll.String())
		}
		if why := sock.CopyReason(); why != nil {
			bound = append(bound, "copy_mode_because", "zero-copy bind refused: "+why.Error())
		}
		cfg.Log.Info("queue bound", bound...)
	}
	e.startWorkers()
	e.logArenaPages()
	return e, nil
}

// servedQueues is the queues to bind: the list given, each checked
// against the interface's active receive queues, or all of those (the
// channels in use, ETHTOOL_GCHANNELS; an interface allocates more than it
// uses, and binding a queue it does not use fails with EINVAL).
func servedQueues(ifname string, list []int) ([]int, error) {
	active, src, err := ethtool.ActiveRXQueues(ifname)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", ifname, err)
	}
	if len(list) == 0 {
		qs := make([]int, active)
		for i := range qs {
			qs[i] = i
		}
		return qs, nil
	}
	for _, q := range list {
		if q >= active {
			return nil, fmt.Errorf("queues: interface %s has %d active receive queue(s), 0-%d (%s), so queue %d cannot be served; change queues, or the channels (ethtool -L %s combined N)", ifname, active, active-1, src, q, ifname)
		}
	}
	return list, nil
}

// nativeMaxMTU is the largest MTU a driver without XDP multi-buffer
// support (veth, most NICs) accepts for native XDP: one 4 KiB page less
// the XDP headroom and the skb's shared info, less the Ethernet header.
const nativeMaxMTU = 3500

// nativeHint says what usually makes a driver refuse native XDP.
func nativeHint(mtu int) string {
	if mtu > nativeMaxMTU {
		return fmt.Sprintf("MTU %d exceeds one page per frame: without XDP multi-buffer support a driver runs native XDP only up to MTU ~%d (lower the MTU, or set xdp_mode = \"generic\" to silence this); generic mode is slower and, on veth, receives every packet on queue 0", mtu, nativeMaxMTU)
	}
	return "the driver may lack native XDP support; generic mode is slower and, on veth, receives every packet on queue 0"
}

// openProgram loads the XDP program: over the pins of the interface when
// the engine pins, reusing a pinned link and maps a previous process left
// (after a crash: the program kept dropping VIP packets meanwhile).
func (e *Engine) openProgram() (*xsk.Program, error) {
	if e.cfg.PinDir == "" {
		return xsk.Load()
	}
	dir, err := xsk.PinDir(e.cfg.PinDir, e.cfg.Interface)
	if err != nil {
		return nil, err
	}
	p, err := xsk.OpenPinned(dir, e.ifindex)
	if err != nil {
		return nil, err
	}
	r := p.Reused()
	e.cfg.Log.Info("xdp pins", "dir", dir, "reused_link", r.Link, "reused_maps", r.Maps, "note", r.Reason)
	return p, nil
}

// newWorker (re)creates q's worker over its socket and tables, and gives
// the table its flood defences (before its worker runs: they are the
// worker's).
func (e *Engine) newWorker(q *queue) error {
	// Set on adopted sockets too: the options are the socket's, and a
	// successor may run with another configuration.
	if err := q.sock.SetBusyPoll(ring.BusyPoll{Timeout: e.cfg.BusyPoll, Budget: e.cfg.BusyPollBudget}); err != nil {
		return err
	}
	q.table.SetNewEntryLimit(e.cfg.NewEntriesPerSecond, e.cfg.NewEntriesBurst)
	if e.cfg.UnconfirmedIdle > 0 {
		q.table.SetUnconfirmedIdle(conntrack.TicksOf(e.cfg.UnconfirmedIdle))
	}
	tables := dataplane.FlowTables{Conntrack: q.table, Sessions: e.sessions, Fragments: e.frags, Peers: e.peers}
	sock, table := q.sock, q.table
	// A request to the worker (a lookup's key, a tally, a scrape's
	// counters) rings the socket's doorbell, which its idle Poll waits on
	// too; while one is pending (a walk over many loops) the idle worker
	// does not sleep. A settled worker sleeps up to settledPollMs, one
	// with work to finish (TX to kick, a scan) 1 ms; one that busy-polls
	// always 1 ms (the kernel leaves the queue's receive work to it).
	if err := sock.EnableDoorbell(); err != nil {
		return err
	}
	table.SetDoorbell(sock.Ring)
	longSleeps := e.cfg.BusyPoll == 0
	var w *dataplane.Worker
	w = dataplane.NewWorker(sock.Rings(), &e.snapshot, tables, e.cfg.Clock, idleWait(func() {
		switch {
		case table.Pending():
		case longSleeps && w.Settled():
			sock.Poll(settledPollMs)
		default:
			sock.Poll(1)
		}
	}))
	q.worker = w
	e.shareExceptions(q)
	return nil
}

// startWorkers starts one goroutine per queue, each locked to its OS
// thread and pinned to a CPU.
func (e *Engine) startWorkers() {
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.procs = len(e.queues)
	addProcs(e.procs)
	cpus := runtime.NumCPU()
	for i, q := range e.queues {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			// The thread is never handed back: pinned to a CPU and perhaps
			// at another nice value, it ends with the worker (Go ends a
			// thread whose goroutine exits locked to it) instead of running
			// other goroutines after a Quiesce or Close.
			runtime.LockOSThread()
			// Pin queue i to CPU i (mod the CPUs we have): the worker and
			// its queue's interrupt handling then share a cache.
			var set unix.CPUSet
			set.Set(i % cpus)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				e.cfg.Log.Warn("pin worker to cpu", "queue", q.id, "err", err)
			}
			// WorkerNice (doc.go "Worker priority"): on a machine shared
			// with other work a negative value keeps a worker from waiting
			// behind it for its CPU (a stall longer than the RX ring's
			// depth loses packets); on a dedicated appliance 0 is cheaper.
			if n := e.cfg.WorkerNice; n != 0 {
				if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), n); err != nil {
					e.cfg.Log.Warn("set worker priority (worker_nice)", "queue", q.id, "nice", n, "err", err)
				}
			}
			q.worker.Run(ctx)
		}()
	}
}

// stopWorkers stops every worker at its next batch boundary and waits.
// Each socket's doorbell is rung: a settled idle worker would otherwise
// notice only at the end of its sleep (settledPollMs), and a hand-over's
// pause would include it.
func (e *Engine) stopWorkers() {
	if e.cancel != nil {
		e.cancel()
		e.cancel = nil
		for _, q := range e.queues {
			if q.sock != nil {
				q.sock.Ring()
			}
		}
	}
	e.wg.Wait()
	removeProcs(e.procs)
	e.procs = 0
}

// Mode is the XDP attach mode the interface got.
func (e *Engine) Mode() AttachMode { return e.mode }

// ZeroCopy reports whether the sockets are in zero-copy mode.
func (e *Engine) ZeroCopy() bool { return e.zeroCopy }

// Queues returns the served queue ids, in the order of Stats.
func (e *Engine) Queues() []int {
	ids := make([]int, len(e.queues))
	for i, q := range e.queues {
		ids[i] = q.id
	}
	return ids
}

// Publish makes s the snapshot every worker reads from its next batch on,
// and makes the XDP program redirect exactly vips. The program learns new
// VIPs before the workers could need them and forgets old ones after. An
// adopted engine holds the VIP set back until Begin: its predecessor's
// set is in force meanwhile.
func (e *Engine) Publish(s *dataplane.Snapshot, vips []VIP) error {
	e.snapshot.Store(s)
	if e.holdVIPs {
		e.heldVIPs = vips
		return nil
	}
	return e.replaceVIPs(vips)
}

// PublishRules is Publish with the VIP set as it is: most publications
// change no rule's VIP, protocol or ports, and skip comparing the set.
func (e *Engine) PublishRules(s *dataplane.Snapshot) { e.snapshot.Store(s) }

func (e *Engine) replaceVIPs(vips []VIP) error {
	set := make([]xsk.VIP, len(vips))
	for i, v := range vips {
		set[i] = xsk.VIP(v)
	}
	if err := e.prog.ReplaceVIPs(set); err != nil {
		return fmt.Errorf("publish vip set: %w", err)
	}
	return nil
}

// Snapshot returns the snapshot the workers read: nil before the first
// Publish, and for a nil engine (one that has not started). Safe from any
// goroutine.
func (e *Engine) Snapshot() *dataplane.Snapshot {
	if e == nil {
		return nil
	}
	return e.snapshot.Load()
}

// Preparing reports whether the engine was adopted and has not begun:
// its predecessor still serves, with its own VIP set.
func (e *Engine) Preparing() bool { return e.holdVIPs }

// QueueStats is what Stats reports per queue: the worker's counters, read
// with atomic loads, the handle of its conntrack table (its requests are
// served by the worker between batches) and the kernel's socket counters.
type QueueStats struct {
	Queue     int
	Counters  *dataplane.Counters
	Backends  *dataplane.BackendStats // packets per rule and backend slot
	Conntrack *conntrack.Control
	Kernel    ring.Stats
}

// Stats returns per-queue counters; safe from any goroutine.
func (e *Engine) Stats() []QueueStats {
	out := make([]QueueStats, len(e.queues))
	for i, q := range e.queues {
		ks, _ := q.sock.Stats()
		out[i] = QueueStats{Queue: q.id, Counters: &q.worker.Counters, Backends: &q.worker.Backends, Conntrack: q.table.Control(), Kernel: ks}
	}
	return out
}

// BackendStats returns every worker's per-backend packet counters; safe
// from any goroutine.
func (e *Engine) BackendStats() []*dataplane.BackendStats {
	var out []*dataplane.BackendStats
	for _, q := range e.Stats() {
		if q.Backends != nil {
			out = append(out, q.Backends)
		}
	}
	return out
}

// Shared returns the shared session and fragment tables (built for
// concurrent readers: safe from any goroutine).
func (e *Engine) Shared() (sessions, fragments *conntrack.Shared) { return e.sessions, e.frags }

// SetCapture gives worker i session s's tap i, in the order of Queues;
// nil takes every tap back. Safe from any goroutine: a worker picks its
// tap up at its next batch.
func (e *Engine) SetCapture(s *capture.Session) {
	for i, q := range e.queues {
		var tap *capture.Tap
		if s != nil {
			tap = s.Tap(i)
		}
		q.worker.SetCapture(tap)
	}
}

// Close stops the workers, detaches the program, removes its pins and
// closes the sockets and arenas: the end of the appliance (xlb stop).
// Closing a closed engine does nothing.
func (e *Engine) Close() error { return e.end(true) }

// end stops the workers and closes this process's fds and mappings (the
// sockets, the arenas); detach also unregisters the sockets, detaches the
// program and removes its pins (Close), else the program stays attached
// and pinned (Release).
func (e *Engine) end(detach bool) error {
	if e.closed {
		return nil
	}
	e.closed = true
	e.stopWorkers()
	var errs []error
	switch {
	case e.prog == nil:
	case detach:
		for _, q := range e.queues {
			_ = e.prog.Unregister(q.id)
		}
		errs = append(errs, e.prog.Close())
	default:
		errs = append(errs, e.prog.Release())
	}
	return errors.Join(append(errs, e.closeQueues())...)
}

// closeQueues closes the sockets and every conntrack arena (this
// process's mappings and fds; a successor's copies live on).
func (e *Engine) closeQueues() error {
	var errs []error
	for _, q := range e.queues {
		if q.sock != nil {
			errs = append(errs, q.sock.Close())
		}
		if q.table != nil && q.table.Arena() != nil {
			errs = append(errs, q.table.Arena().Close())
		}
	}
	for _, s := range []*conntrack.Shared{e.sessions, e.frags} {
		if s != nil && s.Arena() != nil {
			errs = append(errs, s.Arena().Close())
		}
	}
	return errors.Join(errs...)
}

// PinDir is the directory of the program's pins: the pin root and the
// interface, as named in the interface's network namespace (xsk.PinDir).
func (e *Engine) PinDir() string {
	dir, _ := xsk.PinDir(e.cfg.PinDir, e.cfg.Interface)
	return dir
}

// LinkGone returns an error when the interface the engine attached to no
// longer exists (deleted, its namespace gone, or replaced by another link
// of the same name, which has another index). Its sockets then receive
// nothing again: the daemon stops with the error (exit status 1) instead
// of serving nothing unnoticed, and its service manager's restart (or the
// operator) starts it on the interface as it is now.
func (e *Engine) LinkGone() error {
	_, err := netlink.LinkByIndex(e.ifindex)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) || errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("interface %s (index %d) no longer exists", e.cfg.Interface, e.ifindex)
	}
	// Another failure of the query says nothing about the link; a renamed
	// link is the same device, still served.
	return nil
}
