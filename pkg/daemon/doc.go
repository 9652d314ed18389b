// Package daemon runs the appliance: the control plane, and the data
// plane (pkg/engine: the XDP program, the sockets, workers and conntrack
// tables) that it drives. Its API is Run (cmd/xlb's `xlb run`) and
// Simulate (`xlb simulate`); everything else is the package's own.
//
// # Files: one home per concern
//
//	daemon.go    Options, Run, the daemon type and its control loop (signals,
//	             timers, requests), do (run a function on the control goroutine)
//	publish.go   recompute the rules a change touched (failover.Compute →
//	             dataplane.BuildRule, the tables on one goroutine per CPU)
//	             and publish a snapshot sharing the others; the published
//	             status
//	build.go     configuration → eligible-set input (failoverInput, shared with
//	             simulate.go), rule match, XDP VIP set, failover policy
//	enums.go     configuration enums → runtime values: one table per enum
//	             (the engine's attach and bind modes among them)
//	health.go    health verdicts from the probers, applied on the control goroutine
//	services.go  share groups: one prober per backend of a backend service,
//	             or of the rules with their own backends and an equal direct
//	             check, whose verdict every rule of the group reads; what a
//	             CLI change given through a service's rule applies to
//	probepath.go data-path probes: which rules' checks take the data path, the
//	             templates their probes use (the published snapshot's), the
//	             probe path's life (pkg/probepath), the checker's dialer
//	nexthop.go   next-hop resolution (in passes: a neighbour once for all
//	             the backends behind it) and the encapsulation templates
//	             built from it, shared by the rules that send alike
//	reload.go    Reload: a new configuration in whole, or none of it
//	reloadkeys.go which xlb.toml keys a reload applies live (metrics_listen
//	             moves, control_socket_group) and which it refuses; the
//	             guard rails (no rule left, a rule left with drained
//	             backends only: refused without --force)
//	registry.go  rule and backend slots, never reused
//	clock.go     the daemon's one clock (workers' ticks, control deadlines)
//	metrics.go   /metrics (client_golang, pkg/metrics): the families, each
//	             declared once with family(), and the collect functions
//	events.go    the event list of status (health, CLI, reload, BGP)
//	arena_pages.go the conntrack arenas' size and huge-page bytes (the
//	             engine's reading) in status and xlb_conntrack_arena_bytes
//	simulate.go  Simulate: the effect of backend changes, without a daemon
//	warmup.go    a rule's first round of health checks as published ("warm")
//	bgp.go       [bgp]: the speaker, the announce decision per VIP, shutdown order
//	digest.go    table_digest: a rule's tables and eligible set, for fleet checks
//	fleet.go     [fleet]: the flow-state sharing node (pkg/fleet) over the
//	             engine's peer table and rings, its join holding the VIPs,
//	             its status, metrics and lookup, its reload refusal
//	exclusive.go one daemon per interface and control socket (claim)
//	handover.go  restart and upgrade, the running daemon's side: the state
//	             document, handing the files over, the cut-over
//	docparts.go  the state document's parts: the head and 64 buckets of
//	             rules, verdicts and next hops, each section encoded again
//	             only when it changed, and the one assembly of a document
//	successor.go restart and upgrade, the new process's side: prepare, take over
//	lifecycle.go POST /v1/restart and /v1/stop, SIGUSR2
//	systemd.go   under systemd: readiness, MAINPID, the fd store (a restart
//	             or a crash keeps tables and state; a SIGTERM also the sockets)
//	statestore.go the state document in the fd store: its parts, each a
//	             memfd, stored when they changed under a manifest written last;
//	             the restore from the newest complete manifest
//
// The control API (control.API, served on control_socket), by concern:
//
//	control.go   ops (the control.API implementation), serving the socket,
//	             copying rule and backend state off the control goroutine,
//	             POST /v1/reload
//	status.go    GET /v1/status (version and uptime, queues with XSK
//	             statistics, drops apart from passes, events)
//	backends.go  GET /v1/backends and POST /v1/backend/{action}: rows and changes
//	conntrack.go /v1/conntrack list, count and flush; active and inactive
//	             connections per backend (conntrack Tally)
//	sessions.go  PER_SESSION sessions (one shared entry per client): active
//	             while they carry traffic, inactive after that
//	lookup.go    GET /v1/lookup: the packet asked about and the answer's words
//	unmatched.go unmatched_vip_traffic: the catch-all VIP entries of "drop",
//	             and what lookup says of a packet no rule claims
//	rates.go     the rate estimator (fixed 2 s window, its own goroutine):
//	             every per-second figure the daemon shows
//	appliance.go POST /v1/appliance/{drain,undrain}, the appliance part of the
//	             status (drain, peers, VIPs), the BGP metric families
//	capture.go   GET /v1/capture: a capture session's taps handed to the
//	             workers, drained and streamed (pkg/capture)
//
// Formatting of keys and protocols lives with their types (hash.Key.String,
// packet.ProtoName, packet.ParseProto); the command line's tables live in
// cmd/xlb/render.go. New code goes in the file of its concern, or a new
// file named for a new one.
//
// # Goroutines
//
//   - One worker per served queue (pkg/engine, its doc.go has the
//     details), locked to its OS thread: it reads the published snapshot
//     once per batch and never waits for the control plane.
//   - The control goroutine (Run) owns every piece of control-plane state:
//     the configuration, the CLI overlay, each rule's failover.State, the
//     health verdicts, the next hops and the slot registry. Everything that
//     changes them runs on it: signals, health changes, timers, and
//     requests from other goroutines (do).
//   - A publication that computes several rules builds their Maglev
//     tables and digests on up to one goroutine per CPU, each rule as
//     soon as the control goroutine has computed its eligible set and
//     each reading only its rule's input, and waits for them
//     (publish.go builds); a next-hop pass looks routes up on a few
//     goroutines and each neighbour on one of its own, and waits for
//     them (nexthop.go).
//   - Health probers (pkg/health) run on their own goroutines and park
//     their changes for the control goroutine. Those of data-path rules
//     dial through pkg/probepath, whose reader goroutine encapsulates their
//     packets with the templates of the snapshot the control goroutine
//     last published (probepath.go).
//   - The rate estimator (rates.go) samples the workers' atomic counters
//     every 2 s on its own goroutine; requests read its two latest samples
//     under its mutex.
//
// # From configuration to packets
//
//	config.Load + state overlay ──▶ config.View (effective backends, with sources)
//	health verdicts, next hops  ──▶ failover.Compute per rule (prev State kept)
//	failover.State              ──▶ dataplane.BuildRule (Maglev, generations, deadlines)
//	neigh next hop per backend  ──▶ encap.Template per backend
//	rules                       ──▶ dataplane.NextSnapshot ──▶ engine.Publish
//	                                 (atomic snapshot swap + XDP VIP set)
//
// A new snapshot is published at start, on every health or weight change
// (at most every 250 ms, so an oscillating weight header cannot rebuild
// tables per probe), when a next hop changes (resolved every 5 s), when a
// rule's timers are due (failback delay, undrain hold, drain deadlines:
// failover.State.NextCompute), on reload, and on every CLI change. Each
// computes only the rules it touched: a CLI change its rule, a verdict
// the rules of its probe, a next hop the rules with that backend, a reload
// the rules whose file or overrides changed (config.Loader looks only at
// the files its watch on rules_dir saw change and parses only those whose
// bytes did, config.ApplyFrom keeps the other rules' views, and the
// reload pairs old and new rules with config.View.Prior), all
// rules when the seed or the table size changed
// (docs/design.md#publication-that-costs-what-it-changes).
//
// # Decisions where the design is silent
//
//   - Slots: rule slots (by rule name) and backend slots (by rule and
//     address) are handed out once and never reused (a restart or upgrade
//     carries the registry to the successor), so a conntrack entry can
//     never name another rule or backend than its own.
//   - A backend whose next hop (MAC) is unresolved counts as UNKNOWN health
//     for the eligible-set engine: it cannot receive anything, and its
//     flows fall under the persistence rules like those of any backend
//     that stopped answering. It is logged when that changes.
//   - Role overrides from the CLI are per backend while failover groups
//     carry roles: a backend marked with another role than its group's is
//     placed in a group of its own, "<group>~<ROLE>", with the group's zone,
//     capacity scaler and preference.
//   - Backends removed by a reload stay in the rule's failover input as
//     removed (entries honoured for connection_draining_timeout), keep their
//     next hop (and so their encapsulation template) meanwhile, and are
//     forgotten once their drain deadline plus the idle timeout has passed.
//   - queues = "all" binds the interface's active receive queues, not the
//     allocated ones; a listed queue beyond them stops xlb run before
//     anything is attached (pkg/engine, "Served queues").
//   - Reload refuses every key only a start applies (interface, queues,
//     xdp_mode, bind_mode, pin_dir, control_socket, the conntrack sizes
//     and flood limits; reloadkeys.go has the table), naming them — xlb
//     restart applies them without losing a connection — and applies the
//     others live, metrics_listen by binding the new address before
//     anything changes; any configuration error rejects the whole reload
//     and the running configuration keeps serving.
//   - The outer source address is the kernel's preferred source towards
//     the backend, else the interface's first global address of the family.
//   - Health checks of type NONE make every backend healthy; other checks
//     start UNKNOWN (not healthy) until the first verdict, as GCP does.
//
// # Restart, upgrade, stop: the paths and what they lose
//
// The XDP program's link and maps are pinned (pin_dir, ring/xsk), the
// UMEM and the conntrack arenas are memfds (ring, conntrack), and the
// daemon's clock counts CLOCK_MONOTONIC from a base it can hand on, so
// nothing a flow depends on belongs to one process. The engine's part of
// each path (what it hands over, quiesces, adopts, takes over, rebuilds)
// is in pkg/engine's doc; this is the daemon's.
//
//   - xlb restart -c FILE (POST /v1/restart; SIGUSR2 uses the running
//     configuration) and xlb upgrade --binary PATH: beginHandOver starts the
//     successor (/proc/self/exe, or PATH) with `run -c FILE` and a
//     pkg/handover connection, offers the state document (version 1: slot
//     registry, each rule's failover.State with its generations and drain
//     deadlines via MarshalCarry, backends removed by reloads, health
//     verdicts, next hops, the clock base, reload counters) and the files
//     (per queue the AF_XDP socket, the UMEM memfd and the conntrack
//     arena; the session and fragment arenas; the control and metrics
//     listeners). The successor loads FILE, maps everything, restores the
//     state and computes its snapshot while this daemon forwards and its
//     control goroutine serves on (the waits run on a goroutine of their
//     own, driveHandOver; a change the state document would miss is
//     refused meanwhile, restartGuard); its VIP set is held back, and its
//     probers start at the cut-over from the verdicts carried with it. Any error (an invalid
//     FILE, another interface or queue set, a missing pin) is sent back as
//     the reason, the successor exits, and this daemon serves on untouched
//     (the request fails with the reason: `xlb restart` exits 1). Then the
//     workers stop between two batches (quiesce), their free frame lists
//     go over (CUTOVER), the successor takes the rings (ring.Socket.
//     TakeOver), swaps its program into the pinned link when it differs
//     (an upgrade; a restart of the same build keeps the running one, tags
//     equal), resumes the tables, starts its workers and says DONE; this
//     daemon answers the request and exits, detaching nothing. The pause
//     (milliseconds; bench/README.md §5 has the figures) is buffered by
//     the RX rings: 2048 slots, 100 ms at 20 kpps per queue.
//     A successor that fails right after the cut-over, before touching the
//     rings, says so and this daemon resumes its workers; one that dies or
//     goes silent there is killed and this daemon opens new sockets
//     (rebuild: VIP packets are dropped by the program meanwhile, the
//     conntrack tables are kept).
//   - A changed layout on upgrade: XDP maps or conntrack arenas of another
//     layout are replaced (pkg/engine, "A changed layout on upgrade"), and
//     the hand-over's answer and the log say which (Notes) — those flows
//     fall back to Maglev. An unknown state
//     document version is refused (the successor gives up): without the
//     registry the arenas' slots mean nothing.
//   - kill -9 (or any crash) and `xlb run`: the pinned program stays
//     attached and drops the served queues' VIP packets (xlb_ctl: a client
//     retransmits instead of getting the kernel's reset); the next daemon
//     reuses the link and maps (its log says reused_link=true), binds new
//     sockets and starts with empty conntrack tables (the memfds died with
//     the process), so flows placed under an older backend set may move.
//   - Under systemd (deploy/systemd/xlb.service: Type=notify,
//     NotifyAccess=all, FileDescriptorStoreMax): the fd store keeps the
//     conntrack arenas and the state document (in parts, each publication
//     storing those that changed and a manifest: docs/design.md "The state
//     document in parts") while the daemon serves. After a crash the next start
//     (Restart=on-failure) keeps them: new sockets (VIP packets dropped by
//     the program from the crash to the new registration), the tables
//     recounted and cleared of entries naming slots the carried registry does
//     not know, and no flow moves. SIGTERM (systemctl stop or restart) stops
//     the workers between two batches and adds the sockets, their UMEM and
//     the free frame lists: the next start takes the rings over (it loses
//     what arrives beyond 2048 packets per queue while no process reads: a
//     few hundred milliseconds from SIGTERM to the new READY=1,
//     bench/README.md §5). `xlb restart` under systemd: the successor sends
//     MAINPID= before its predecessor exits. SIGTERM under systemd withdraws
//     BGP routes as before (systemctl stop and restart look the same to the
//     daemon); `xlb restart` is the path that keeps them. Tested against a
//     stand-in for systemd's notify socket and fd store
//     (TestEndToEndSystemd): no real systemd runs as PID 1 in the test
//     environment.
//   - xlb stop (POST /v1/stop) and SIGTERM/SIGINT or the end of Run's
//     context: detach, unpin, close: VIP packets go to the kernel again.
//     With no daemon, `xlb stop` removes the pins itself. Under systemd
//     SIGTERM is the restart path above instead; xlb stop also empties the
//     fd store.
//   - BGP (docs/design.md#bgp-across-a-hand-over): a hand-over must not
//     withdraw, or the routers would move flows to appliances without this
//     conntrack table. The predecessor Detaches its speaker right after the
//     cut-over (no withdraw, no NOTIFICATION; its BFD reactions held from
//     the cut-over on: bgp.Speaker.HoldBFD); the successor resumes the BFD
//     sessions at the cut-over, before DONE (successor.go resumeBFD), and,
//     its rules warm with their verdicts, starts its speaker with the same
//     identity as soon as it serves, restarting (graceful restart's Restart
//     State and Forwarding State bits) and with the VIPs it announces in
//     its table before any session opens (bgp.go openBGP). With [bgp]
//     graceful_restart (RFC 4724) the routers keep the routes, stale,
//     meanwhile (TestEndToEndRestartBGP: the route never leaves the router).
//     Graceful restart is off by default because it has a price after a
//     crash: the routes stay up to graceful_restart while the pinned program
//     drops the VIP packets, where without it they go as soon as the sessions
//     drop (a fleet detects a killed appliance in well under a second:
//     deploy/fleet.md). Without it a hand-over costs the routes from the
//     cut-over until the successor announces (about 2 s). The way with
//     neither price — a speaker process of its own that outlives the daemon
//     and withdraws when the daemon dies without handing over — is not built.
//
// Decisions where the design is silent: BPF objects travel through their
// pins, not over the socket (the pins serve a crash too); the successor
// serves the control and metrics sockets from the inherited listeners
// only after the cut-over (the listening socket never closes, so no
// request is refused); a successor whose configuration changes
// conntrack.max_entries keeps the arenas' sizes until the next cold start;
// workers run at worker_nice (see "Worker priority");
// counters (metrics) start again from zero in the successor, as after any
// restart of a Prometheus target, except the kernel's socket counters,
// which belong to the sockets.
//
// A daemon whose interface disappears (deleted, its network namespace
// gone, replaced by another link of the same name) stops within a second
// with exit status 1, "interface X (index N) no longer exists", detaching
// and unpinning what is left: its sockets would never receive again, and
// a daemon serving nothing unnoticed is worse than one its service
// manager restarts on the interface as it is now (Engine.LinkGone, checked
// on the control loop's 1 s tick).
//
// # Worker priority
//
// worker_nice (default 0) is the workers' nice value; pkg/engine's doc,
// "Worker priority", says why 0 and when a negative value. A reload
// refuses a change; xlb restart applies it.
//
// # The control API
//
// ops implements control.API for a running daemon; controlHandler wraps
// it in control.NewHandler and startControl serves it on control_socket.
//
// Goroutines. Every request runs on its http.Server goroutine. What the
// control goroutine owns (configuration, overlay, view, slot registry,
// probe verdicts, next hops) is read or changed only inside d.do, which
// runs a function on the control goroutine; the functions are short and
// never wait for a worker. Conntrack requests then go to the workers
// through their tables' Control handles (conntrack.Control: a mailbox the
// worker serves between batches) from the request's goroutine, so a slow
// walk never blocks the control loop, and the shared tables are walked
// directly (they are built for concurrent readers). The data-plane
// snapshot is read through its atomic pointer.
//
// Changes. A backend change edits the overlay, saves it (atomically) and
// only then recomputes and publishes; the reply is sent after the
// publication, so an acknowledged change survives a crash and is in force.
// A save that fails restores the overlay from the file (unchanged by the
// failed atomic write) and the request fails; nothing is published. A
// change that changes nothing (draining a drained backend) is not saved.
//
// Decisions where the design is silent:
//   - One daemon per interface and socket (exclusive.go): a fresh start
//     refuses an interface whose XDP program a live process holds
//     (/proc/*/fdinfo, as bpftool finds pids), naming it: "eth0 already
//     has an XDP program (another xlb? pid N (xlb))"; a program nobody
//     holds (a crashed xlb's pinned link, or one systemd stopped with its
//     fd store) is taken over as before, and a successor of xlb restart
//     never runs the check. It then binds control_socket before anything
//     is attached and stops when another process (its pid from
//     SO_PEERCRED) serves it: a daemon the CLI cannot reach would run
//     unmanaged and share the state file.
//   - control_socket is read when Run starts; a reload that changes it
//     does not move the socket (restart xlb).
//   - Tracked connections per backend are counted with one Tally walk per
//     queue (counts per rule and backend slot, active or inactive, into
//     arrays sized from the snapshot: nothing is allocated per entry, so
//     xlb top can ask every second of a table of millions) plus one List of
//     the shared session table; the walks are spread over the workers'
//     batches by the conntrack mailbox. Only entries that still decide
//     count (snapshot.EntryValid, run by the worker during the walk).
//     Active: no FIN or RST seen and confirmed; inactive: a FIN or RST seen,
//     or a SYN not answered yet (IPVS's ActiveConn/InActConn); both fall
//     to 0 as the entries idle out.
//   - PER_SESSION sessions (sessions.go): a rule with a CLIENT_IP or
//     CLIENT_IP_PROTO affinity keeps one shared-table entry per client and
//     none per connection, and that table sees no FIN or RST, so "active
//     while any of its connections is" cannot be known. A session is
//     active while it carries traffic: its last packet (idle - the time
//     it has left: the table refreshes a deadline at most once a second)
//     is within 10 s, or half the rule's idle timeout when that is
//     shorter; inactive after that, held for affinity until it idles
//     out. Such a rule's (and its backends') active and inactive
//     connections, in status, xlb top and xlb_backend_connections_active
//     and _inactive, are its sessions so split; status says so with the
//     rule's session_active_seconds (the text: "sessions N active (a
//     packet in the last 10s), M inactive"). A rule whose idle timeout a
//     reload shortened counts its sessions refreshed before as active
//     until they are refreshed again or expire.
//   - Per backend the status has packets, bytes (IP bytes as received) and
//     new connections, as totals and rates; per rule their sums over its
//     backends (what it forwarded: a rule's drops are in the drop reasons).
//     Per backend also the health check's last probe time and latency,
//     when its health last changed and how often (pkg/health.Status).
//   - Events (events.go): tier switches and the other eligible-set events
//     come from each rule's failover history (carried across a restart);
//     health changes, CLI changes (backend and appliance, with who asked),
//     reloads (accepted or rejected with the first issue), VIP
//     announcements and withdrawals, and BGP session changes are kept in a
//     list of the last 128 as they happen; status shows the newest 50 of
//     both, oldest first.
//   - Version and uptime: the module version and VCS revision
//     (pkg/buildinfo) and the time Run started; a restart's successor
//     starts its own uptime.
//   - xlb_drop_packets_total counts drops only; frames that were not ours
//     (dataplane.Reason.Pass) are xlb_pass_packets_total, and status lists
//     them apart (counters.drops, counters.passes). A packet counts once,
//     under its final outcome (pkg/dataplane "What a batch counts").
//   - Every rate (packets/s of the appliance, of each queue and backend)
//     comes from one estimator with a fixed 2 s window, as ipvsadm's
//     (rates.go): a goroutine of its own samples the workers' counters
//     every 2 s and a rate is the difference of the two latest samples, so
//     it is at most one window old, 0 one window after traffic stopped,
//     and a request never waits for it. Status says the window
//     (rates.window_seconds) and the measured distance (rates.seconds).
//     Totals (packets since start) are read at the request. The workers
//     count per backend in dataplane.BackendStats, at most one batch
//     behind. New counters that need a rate go in rates.go's sample (per
//     queue rx, tx and drops; per backend packets, bytes and new
//     connections are there).
//   - lookup answers for an established packet (ACK) by default, --syn for
//     a connection's first SYN. It searches every queue's table for the
//     tracking key (the queue a flow lands on is the NIC's RSS choice,
//     unknown here) with one probe per queue (conntrack Control.Get), and
//     the shared session table directly; a queue that does not answer
//     makes it say the entry was not checked.
//   - A configuration enum value without a runtime value is a bug of
//     enums.go, caught by TestEnumTables; at run time it panics rather
//     than guess (config.Load accepts no value without a name).
//
// # BGP (bgp.go, warmup.go, digest.go, appliance.go)
//
// The speaker (pkg/bgp) starts once the first snapshot is published and
// the control socket serves; announce runs on the control goroutine after
// every publication and every appliance drain or undrain. A VIP is
// announced while every rule of it is warm (warmup.go: the first verdict
// of every checked backend in the published snapshot, or the warm-up
// deadline) and at least one of them has tier PRIMARY, FAILOVER or
// PRIMARY_FALLBACK with a non-empty eligible set, and the appliance is not
// drained; otherwise it is withdrawn. Decisions where the design is silent:
//   - LAST_RESORT withdraws like EMPTY: the appliance sees no backend
//     passing its checks, so appliances that see one should take the
//     traffic; when none does, the VIP leaves the routers (vc5 and
//     ExaBGP's withdraw-on-down do the same).
//   - Warm is latched per rule: a backend added to a warm rule by a reload
//     does not withdraw a serving VIP. The start-up herd
//     (docs/design.md#health-checks)
//     can hold a rule on its start-up set with the same ruleRuntime.warm.
//   - Shutdown order (SIGTERM, context end): withdraw every VIP, sleep
//     withdraw_delay while the data plane keeps forwarding (the control
//     loop has ended: health changes are no longer applied), close the
//     sessions with a NOTIFICATION, then the deferred stops of the
//     control socket, metrics, health checks and data plane run.
//   - Reload: peers and attributes (med, communities) change live; a
//     change of local_as, router_id or hold_time is refused (restart xlb);
//     adding [bgp] starts the speaker, removing it withdraws and closes at
//     once (no withdraw_delay: the appliance keeps serving).
//   - xlb appliance drain without [bgp] is refused (409): nothing is
//     announced, so it would withdraw nothing. The drain is saved first;
//     the announcements follow it.
//   - A speaker that cannot start (no IPv4 address for the router id, a
//     passive peer's port taken) stops xlb run with the error: an
//     appliance that cannot announce serves nobody in a fleet.
//   - table_digest is SHA-256 over the seed, the affinity, each Maglev
//     table slot by slot and its members (name, weight), first 16 hex
//     digits; backends are named by address, never by the local slot.
//
// # The fleet node (fleet.go)
//
// With [fleet] the daemon starts a pkg/fleet node once the data plane
// serves, before the BGP speaker, over the engine's peer table and its
// workers' rings. Decisions where the issue was silent:
//   - Every VIP waits for the node's join (decideVIP's hold), whatever the
//     other conditions; the join's end (all peers answered, or
//     join_timeout, logged as a warning and counted) runs announce from
//     the node's goroutine through d.do, never waited for there.
//   - Undrain asks the peers again (the drained appliance kept receiving,
//     but a join is cheap and proves it) before the VIPs return; drain does
//     nothing to the node.
//   - A successor of xlb restart takes the peer table over with the other
//     arenas and starts joined, so its announcements, which keep the
//     routes, do not wait; it still asks every peer for everything once it
//     proves the peer's epoch. A start after a crash joins.
//   - A reload refuses any [fleet] change, adding or removing it included
//     (restartOnly): the node, its socket and the peer table are made at
//     start; xlb restart applies them.
//   - xlb lookup consults the peer table where a worker would (after the
//     queue's table, or the session table, has nothing) and names the
//     peer whose copy decides; a queue's entry made from a peer's copy
//     says so (conntrack.MarkFromPeer).
package daemon
