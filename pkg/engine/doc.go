// Package engine is the appliance's data plane as a whole: the XDP
// program on the interface, one AF_XDP socket (with its UMEM) and one
// worker per served queue, the conntrack tables (one per queue, and the
// shared session and fragment tables) in their memfd arenas, the snapshot
// the workers read, and their hand-over to another process. pkg/daemon
// drives it; pkg/dataplane is what each worker runs on each batch.
//
// # What the daemon may do with an engine
//
//	Start(cfg)                 bind every queue, attach, start the workers
//	Adopt(cfg, state, take)    map what a predecessor handed over, VIP set held
//	  TakeOver(free), Begin()    the cut-over, then serve
//	Publish(snapshot, vips)    the rules the workers apply and the VIP set
//	Snapshot()                 what the workers read now
//	Stats(), BackendStats()    per-queue counters, conntrack handles, socket counters
//	Shared()                   the shared session and fragment tables
//	Peers(), Outboxes()        [fleet]: the peer table, the workers' hand-off rings
//	SetCapture(session)        hand the workers a capture's taps (nil: take them back)
//	ArenaPages()               the arenas' bytes and huge pages (at most 5 s old)
//	Queues(), Mode(), ZeroCopy(), PinDir(), LinkGone()
//	State(), Files()           what a successor needs (state document, fds)
//	Quiesce() → free frames    stop the workers between two batches
//	Resume()                   the successor gave up: run on as before
//	Rebuild()                  the successor died after the cut-over: new sockets
//	Release()                  close this process's fds, detach nothing
//	Close()                    detach, unpin, close: the end of the appliance
//
// Configuration (Config) is given whole at Start or Adopt; nothing of it
// changes while the engine runs (a reload that would change it is refused
// by the daemon, and xlb restart applies it through a successor).
//
// # Files
//
//	engine.go    Config, Start, the served queues, the workers, Publish,
//	             Snapshot, Stats, SetCapture, Close, LinkGone
//	handover.go  State, the files handed over, Quiesce, Resume, Release,
//	             Rebuild, Adopt, TakeOver, Begin, and the tables a start
//	             after a crash keeps (Config.Arenas)
//	arenas.go    the arenas' pages: logged when the engine serves, read
//	             for status and metrics (ArenaPages)
//	procs.go     the Ps added to GOMAXPROCS for the running workers,
//	             ControlProcs, an idle worker's wait (idleWait)
//	fleet.go     [fleet] (Config.PeerEntries): the peer table (an arena
//	             handed over and kept like the session table) given to every
//	             worker, and each worker's exception scan and hand-off ring
//
// # Goroutines
//
//   - One worker per served queue, on an OS thread of its own (ended with
//     the worker, never handed back to other goroutines) pinned to CPU
//     (its index mod NumCPU), at Config.WorkerNice: RX batch → parse → decide → encap → TX
//     on the queue's AF_XDP socket (dataplane.Worker.Run). A worker reads
//     the published snapshot once per batch and never waits for anything
//     else; requests for its conntrack table (conntrack.Control: count,
//     list, flush, tally, get) wait in a mailbox it serves between
//     batches. An idle worker sleeps in the socket's poll, which also
//     waits on the socket's doorbell (an eventfd) that every such request
//     rings once posted, and does not sleep while one is pending: a
//     request is answered at once, not at the end of a sleep per queue,
//     and a walk over many loops runs them back to back (a lookup over
//     the control socket 1.1 → 0.3 ms). The sleep is up to 1 ms while the
//     worker has work to finish between batches (TX the kernel has not
//     taken, which copy mode sends 32 descriptors per kick; an exception
//     scan), else up to settledPollMs (8 ms: dataplane.Worker.Settled),
//     and always 1 ms with busy_poll; the idle sweep of the conntrack
//     table keeps its pace per millisecond. A packet wakes the poll
//     either way, and stopping the workers rings every doorbell, so only
//     the idle loop's rate changes: 125 a second per idle queue instead of
//     1000. Each running worker adds a P
//     to GOMAXPROCS (procs.go): a goroutine locked to its thread holds its
//     P while it runs and while it sleeps in the socket's poll, which on
//     a 2-CPU appliance left the control plane (the start's table
//     builders) waiting for Ps the idle
//     workers held; with a P each, the kernel shares the CPUs between the
//     worker threads and the control plane's, and Config.WorkerNice is
//     the knob that favours the workers. Parallel control work sizes
//     itself by ControlProcs (GOMAXPROCS without the workers' Ps). An
//     idle worker passes through Go's scheduler every 4 ms
//     (runtime.Gosched): otherwise Go's monitor takes a goroutine that
//     is never rescheduled for one running for over 10 ms, preempts it
//     and retakes its P at every poll, and wakes every 20 µs itself.
//   - Every other method runs on its caller's goroutine, the daemon's
//     control goroutine, one at a time; Snapshot, Stats, BackendStats,
//     Shared, SetCapture and ArenaPages are safe from any goroutine (the
//     snapshot is an atomic pointer, the counters atomics, the shared
//     tables built for concurrent readers, the taps atomic pointers).
//   - Publish swaps the snapshot pointer: a worker sees the new rules from
//     its next batch on. The XDP program's VIP set learns new VIPs before
//     the workers could need them and forgets old ones after.
//
// # Decisions
//
//   - Served queues: an empty Config.Queues (queues = "all") binds the
//     interface's active receive queues (ETHTOOL_GCHANNELS via
//     pkg/ethtool, else the real count in sysfs), not the allocated ones:
//     a plain veth allocates one per CPU and uses one. A listed queue
//     beyond them fails Start before anything is attached, with the count
//     and how to change it.
//   - Start loads the XDP program (its maps and the kernel's verifier,
//     about 100 ms) beside making the arenas and binding the sockets,
//     which do not need it, then attaches it and registers the sockets:
//     the program's load was about two thirds of the engine's start, on
//     one CPU. A socket bound before the program is attached receives
//     nothing until it is registered, as before.
//   - Once a queue's socket is registered, a VIP packet that finds no
//     socket on its queue (between two owners: a crash, a restart) is
//     dropped by the program, not handed to the kernel: a client then
//     retransmits instead of getting the kernel's reset.
//   - Worker priority (Config.WorkerNice, config worker_nice, default 0): a
//     worker at a negative nice value never waits behind other work for its
//     CPU (a stall longer than the RX ring's depth loses packets, a
//     hand-over's pause included), but the kernel's work for its queue (NAPI,
//     the copies, TX completions) runs on the same CPU, and a worker at -10
//     takes that CPU's share from ksoftirqd and then does the pending softirq
//     work in its own context, at a higher cost (bench/README.md, "The
//     workers' nice value", measured it). A dedicated appliance has nothing
//     for a worker to wait behind, so 0 is the default; a machine shared with
//     other work (the lab tests: pkg/lab writes -10) sets a negative value.
//     Without CAP_SYS_NICE the engine warns and runs on at the process's
//     priority.
//   - Nothing a flow depends on belongs to one process: the program's
//     link and maps are pinned (Config.PinDir, ring/xsk), the UMEM and the
//     arenas are memfds (ring, conntrack), and the arenas record the
//     clock base their deadlines count from (Config.ClockBase).
//   - A hand-over (Quiesce on one side; Adopt, TakeOver, Begin on the
//     other): the predecessor's workers stop between two batches and give
//     their free frame lists; the successor's sockets take the rings over
//     (ring.Socket.TakeOver) and it swaps its program into the pinned link
//     only when it differs (an upgrade: tags differ), as the last step of
//     TakeOver, so an error before leaves the predecessor able to Resume.
//     An adopted engine holds its VIP set back until Begin: the
//     predecessor's set stays in force while the successor prepares.
//     Packets arriving meanwhile wait on the RX rings (2048 slots per
//     queue). A successor that dies after the cut-over may have moved
//     frames and swapped its program in: Rebuild opens the program again
//     from the pins and binds new sockets, keeping the tables (recounted).
//   - A changed layout on upgrade: XDP maps of another layout get new maps
//     with the VIP set copied (ring/xsk), and the sockets are registered
//     in them; a conntrack arena of another bucket layout starts empty,
//     with a note saying which (Adopt's notes: the log and xlb restart's
//     answer); those flows fall back to Maglev.
//   - A start after a crash (Config.Arenas, from systemd's fd store):
//     sockets are new (the dead process's rings cannot be trusted; the
//     kernel frees their queues later, from a work queue, so binding waits
//     up to 10 s while a queue is still bound), the
//     arenas are adopted, recounted (the clean-stop flag is not set) and
//     cleared of entries naming slots Config.Keep does not know, before a
//     worker runs; an arena this build cannot read starts empty.
//   - A successor whose configuration changes conntrack.max_entries keeps
//     the arenas' sizes until the next cold start; the interface and the
//     queue set must be the predecessor's (Adopt refuses another).
//   - LinkGone reports an interface that no longer exists (deleted, its
//     namespace gone, replaced by another link of the same name: another
//     index); a renamed link is the same device, still served. The daemon
//     checks it every second and stops: its sockets would never receive
//     again.
//   - The arenas' pages are read from /proc/self/smaps in one pass for
//     every arena and the reading serves for 5 s (arenas.go): reading
//     smaps walks the page tables of every mapping, which costs tens of
//     milliseconds for a few hundred MiB on 4 KiB pages (bench/README.md,
//     "The arenas' pages in status").
//   - The engine's API names the socket layer's values (AttachMode,
//     BindMode) with aliases of ring's and ring/xsk's types, so a
//     configuration value crosses unchanged; the VIP set is the engine's
//     own type (VIP), converted when the program's map is written. The
//     daemon so imports neither ring nor ring/xsk nor pkg/ethtool.
package engine
