// Package dataplane decides, for each packet a worker receives, what
// happens to it: which forwarding rule it belongs to, which backend it goes
// to, and whether it is dropped, answered or passed — exactly as
// docs/design.md#behaviour-contract says, without allocating, locking or
// making a syscall.
//
// # Ownership
//
//   - Snapshot is immutable. The control plane builds one (BuildRule per
//     rule from its configuration and its failover.State, then
//     NewSnapshot), publishes it with one atomic pointer swap, and workers
//     load the pointer once per batch. A worker never waits for the control
//     plane and the control plane never waits for a worker. Rules is a
//     table of pointers: NextSnapshot shares every unchanged rule (and its
//     tables) with the previous snapshot and keeps its matcher when no
//     rule's match changed, so a change costs its rules and the table.
//   - FlowTables is one worker's state: its conntrack.Table, touched by that
//     worker only, and the conntrack.Shared tables (PER_SESSION sessions,
//     fragment tracking) that all workers share.
//   - A Worker owns its rings, its per-batch arrays (Meta, parse results,
//     half-made decisions), its counters and its BackendStats; other
//     goroutines only read Counters and BackendStats.Packets (atomics,
//     published once per batch).
//
// # The batch (Worker.Step)
//
// A packet run to completion takes its cache misses one after the other: the
// frame the kernel just wrote, the conntrack bucket's header line, the
// matching slot line, the Maglev slot. On the appliance those are misses to
// memory (a 2^20-flow table is 144 MiB), and in vivo they cost more than
// everything else the worker does (profiles of the run-to-completion worker
// put most of conntrack's Lookup and of Parse on one load each;
// bench/README.md). So Step runs a batch in stages, each over all its
// packets, with the loads of the next stage prefetched by the one before:
//
//	S1 prefetch each frame's header line(s)
//	S2 packet.ParseInto into the worker's own [Batch]Meta (no copies)
//	S3 prepare: rule, tracking key, Locate (the one bucket hash), prefetch
//	   both bucket headers; for a packet Maglev will place whatever the
//	   tables hold (SYN re-selection, untracked), the selection hash and a
//	   prefetch of its Maglev slot
//	S4 scan each packet's tags, prefetch the matching slot line
//	S5 finish in packet order, with S3's Probe (no second hash); then S6
//	   encapsulate and write the TX descriptors of that packet
//
// Deciding in packet order keeps the semantics of one packet at a time:
// two packets of one new flow in a batch insert once and hit once, an
// insert that evicts is seen by the later packets
// (TestBatchEqualsOneAtATime holds the worker to Decide on a twin of the
// tables). S5 and S6 share a loop: the backend's template is hot, and the
// decision need not be stored. Decide itself is prepare then finish, so
// the worker and every test of Decide run the same code. PER_SESSION
// 2- and 3-tuple sessions (the shared table), fragments under fragment
// tracking and ICMP errors are not prefetched: they are rare, and their
// tables are shared or small.
//
// Per batch, not per packet: the snapshot pointer is loaded and tested
// once; counters are summed in plain fields and added once; per-backend
// counts are plain worker-owned totals published with one atomic store per
// backend touched (BackendStats). A tracked hit computes no selection hash
// unless its template reads one (GUE's source port, an IPv6 outer header's
// flow label: encap.Template.UsesFlowHash).
//
// # What a batch counts
//
// Every received frame is counted once, under its final outcome: a packet
// Decide sent on but that could not leave (no next hop, too big for the
// path, no room to encapsulate) is a drop with that reason, not a tx
// (forward makes the Decision what happened). So rx = tx + reply + drop
// + pass, and the packets counted per backend (BackendStats) add up to the
// verdict tx. A packet too big for the path is a drop (packet-too-big)
// even though a frame (the ICMP error to the client) leaves in its place;
// frames that found the TX ring full are counted as tx-ring-full drops
// after the fact (their verdict was counted already).
//
// Per backend the worker counts packets, their IP bytes as received, and
// new connections: a trackable flow placed by the Maglev table (a SYN, a
// miss, a re-selection after the entry went stale; Decision.New).
// Untracked flows (UDP under affinity NONE, ICMP) open no connections.
// A FIN or RST marks the flow's conntrack entry closed (CloseAt: a flag
// bit, found again in the lines the packet's lookup just read): the
// control plane counts open entries as active connections and closed
// ones as inactive (IPVS's ActiveConn/InActConn), until they idle out.
// The mark costs a flag test per tracked TCP packet and a second probe of
// cached lines per FIN or RST; a count kept by the worker instead would
// drift whenever an entry expires, is evicted or flushed without a FIN.
//
// # Capture (capture.go)
//
// The worker loads its capture tap (package capture) once per batch; nil
// (no capture) costs that load and a nil test per packet of a local. With
// a tap, a packet the filter may want is copied into the tap's ring
// before forward rewrites it (RX) and published with its final outcome
// after, and each frame it sent is copied (TX). The tap rate-limits and
// never blocks; it allocates nothing (TestCaptureStepAllocatesNothing).
//
// # Decide
//
//	ICMP error quoting a flow ─▶ reverse the quoted tuple ─▶ that flow's rule,
//	                              entry (never created or confirmed) or Maglev
//	rule = Matcher(dst, proto, port)     no rule ─▶ Drop(no-rule), except
//	       an ICMP echo request to a VIP ─▶ Reply (rewritten in place)
//	       when some rule of the VIP admits its source, else Drop(source-range)
//	source outside the rule's SourceSet ─▶ Drop(source-range), before any table
//	fragment_tracking and a fragment ─▶ the datagram's remembered backend,
//	                              else place it (first fragment as if whole)
//	tracking key (affinity × mode); SYN rule of "New or existing"
//	entry found and valid ─▶ Tx(its backend)
//	else Maglev(selection hash) over the eligible set ─▶ insert ─▶ Tx
//	eligible set empty ─▶ Drop(no-backend)
//
// Validity of an entry is checked at lookup in O(1)
// (docs/design.md#entry-lifetime): the rule's flush generation (failover
// switch with draining off), the backend's unhealthy generation unless the
// rule's persistence policy keeps the flow, and the backend's drain
// generation with its deadline (draining on removal, CLI drain, draining on
// failover). Nothing walks the table on the packet path. An invalid entry is
// overwritten by a fresh decision (a "replacement entry", which a later
// recovery of the old backend does not remove).
//
// # Decisions where the design is silent
//
//   - Rules: a protocol-specific rule takes precedence over an L3_DEFAULT
//     rule on the same VIP (the order Google Cloud applies to forwarding
//     rules sharing an address; docs/design.md#rules-and-vips); L3_DEFAULT
//     always covers all ports. Packets
//     without ports (non-first fragments, ESP, GRE, ICMP…) match only
//     all-ports rules.
//   - Backend and rule slots are stable across snapshots; the control
//     plane must not reuse a slot before every entry that may name it has
//     expired (drain deadline plus idle timeout).
//   - Echo requests to a VIP are answered by the appliance only when no
//     L3_DEFAULT rule covers the VIP; an L3_DEFAULT rule sends them to its
//     backends like every other ICMP message to its VIP, hashed per packet
//     (never tracked), so an operator who forwards "every protocol" sees the
//     backends answer (docs/design.md#icmp; the starting brief had the
//     appliance answer every echo). The echo test runs after the rule match,
//     so it costs nothing on the path of other packets.
//   - An ICMP error is routed but never creates an entry nor confirms a
//     SYN's entry (it is no proof the flow is established). Errors quoting a
//     packet whose source is not a VIP are dropped (icmp-not-for-flow).
//   - Fragment tracking (docs/design.md#fragments, beyond GCP): all
//     fragments of one datagram (src, dst, proto, IP ID) follow the first
//     fragment to arrive, whatever the order, for FragmentTTL (5 s). A first
//     fragment that arrives first is placed like the flow's unfragmented
//     datagrams (5-tuple under 5-tuple affinity), so a flow's fragmented
//     and whole datagrams share a backend; a non-first fragment that arrives
//     first is placed by its 3-tuple. Without fragment tracking every
//     fragment is hashed by 3-tuple (2-tuple under CLIENT_IP), as GCP does.
//   - PER_SESSION with CLIENT_IP or CLIENT_IP_PROTO keeps its 2- and 3-tuple
//     sessions in the shared table: one client's connections arrive on
//     different RSS queues. Every other entry lives in the worker's own
//     table (RSS keeps a 5-tuple, and a port-less 3-tuple, on one queue).
//   - Table full, or the queue's new-entry rate exceeded (conntrack's
//     flood defences): a new flow that gets no entry is forwarded by its
//     hash, never dropped (counted by conntrack: insert_failure,
//     insert_skipped). A new PER_SESSION session in the shared table is
//     charged to the same per-queue rate (Table.AllowNew). Every new entry
//     is unconfirmed until the flow's next packet; an ICMP error's lookup
//     never confirms one.
//
// # Source ranges (sources.go)
//
// A rule's source_ranges are a SourceSet in the snapshot, tested in
// prepare right after the rule match, so a refused packet touches no
// conntrack, session or fragment table and is counted (source-range) and
// captured like any drop (docs/design.md#source-ranges). The set is a
// multibit trie, one level per address byte with one root per family: a
// node's full map says which byte values a prefix covers, its child map
// which have a deeper node, and a child's index is the node's base plus
// the popcount of the child bits below its own. A lookup is at most 4
// nodes for IPv4 and 16 for IPv6, whatever the number of prefixes. It was
// measured against github.com/gaissmai/bart's Lite (same idea, a generic
// API over netip.Addr) and kept for being faster on the 16-byte form the
// worker holds (BenchmarkSourceSet; bench/README.md). The test is in the
// worker rather than the XDP program because the kernel's LPM trie costs
// more per admitted packet and grows with the prefixes
// (BenchmarkXDPSourceLPM in ring/xsk). An ICMP error is judged by the
// client of the flow it quotes; an echo request by the union of its VIP's
// sets (Matcher.answersEcho), built with the snapshot.
//
// # Fleet flow-state sharing (exceptions.go)
//
// With [fleet], FlowTables.Peers is the table of the exceptions peers
// sent (flows whose backend is not what the tables pick, placed by another
// appliance). A flow the queue's table (or the session table) has no
// entry for is looked up there before Maglev places it (Snapshot.fromPeer:
// one hash and, thanks to the table's presence filter, usually one load);
// a valid peer entry decides, and is copied into the queue's table marked
// as from a peer and as an exception, so the next packets hit locally and
// this appliance refreshes it to the other peers from then on. A SYN that
// re-selects never looks. Each worker told to share (ShareExceptions)
// scans its own table between batches for exceptions and hands them to
// the fleet sender through a bounded lock-free ring (pkg/spsc); the ring
// never blocks the worker and a full one only delays the scan. Snapshot.
// Pick is what Decide would choose for a new flow of a tracking key, and
// Snapshot.Placement a digest of every table, whose change starts a scan
// of every entry.
//
// # Explain
//
// Explain runs decideFlow, Decide's own function, with a trace: the entry
// comes from the caller's finder instead of the worker's tables, each step
// is recorded, and nothing is created or confirmed. The SYN test ("New or
// existing") is made once, in prepareFlow, for Decide and Explain alike;
// an ICMP error's quoted flow goes through prepareFlow and decideFlow too
// (looked up without confirming or refreshing, never created).
//
// # Prefetch: a stub, not loads
//
// The prefetches are pkg/prefetch.Line, a PREFETCHT0 (amd64) / PRFM
// PLDL1KEEP (arm64) stub called through prefetch.Of. The pure-Go
// alternative, an independent one-byte load folded into a sink (inlined,
// no call), was measured against it and is slower: a load that misses
// holds its place in the reorder buffer and the loop behind it stalls,
// while a prefetch retires at once. The stub was never slower than the
// loads in BenchmarkGather and BenchmarkPipeline's cold cases. Staging
// alone already helps hits (a batch's lookups are independent loads the
// core can overlap); the hints help SYNs, whose inserts read both headers,
// and the appliance, whose batches the kernel's work between them leaves
// colder. Both alternatives stay buildable (-tags prefetchload,
// -tags prefetchnone), so the choice can be measured again on another
// machine.
//
// Tried and not kept: prefetching only the first bucket's header in S3
// and the second's in S4 after a tag miss there (a hit would load fewer
// lines, but the two header misses of a packet overlap, so their cost is
// their latency, not their number: hits did not change and misses got
// slower); placing entries in the first bucket more often (it brings the
// first eviction forward: capacity is not traded for it).
//
// What remains of the table's cost in vivo is mostly the page walk of the
// bucket headers, which 2 MiB pages shorten: the daemon's arenas are
// memfds, which get huge pages only where the appliance enables shmem THP
// (/sys/kernel/mm/transparent_hugepage/shmem_enabled = advise) and the
// arena is advised before it is populated; see conntrack's doc.
//
// # Measured
//
// BenchmarkDecide (hit, miss, syn) and Worker.Step allocate nothing
// (TestWorkerStepAllocatesNothing). bench/README.md has the figures:
// BenchmarkGather, BenchmarkPipeline's warm and cold cases under each
// prefetch variant, the alternatives above, and the in-vivo profiles.
package dataplane
