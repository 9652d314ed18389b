// Package dataplane decides, for each packet a worker receives, what
// happens to it: which forwarding rule it belongs to, which backend it goes
// to, and whether it is dropped, answered or passed — exactly as DESIGN §3
// says, without allocating, locking or making a syscall.
//
// # Ownership
//
//   - Snapshot is immutable. The control plane builds one (BuildRule per
//     rule from its configuration and its failover.State, then
//     NewSnapshot), publishes it with one atomic pointer swap, and workers
//     load the pointer once per batch. A worker never waits for the control
//     plane and the control plane never waits for a worker.
//   - FlowTables is one worker's state: its conntrack.Table, touched by that
//     worker only, and the conntrack.Shared tables (PER_SESSION sessions,
//     fragment tracking) that all workers share.
//
// # Decide
//
//	ICMP error quoting a flow ─▶ reverse the quoted tuple ─▶ that flow's rule,
//	                              entry (never created or confirmed) or Maglev
//	ICMP echo request to a VIP ─▶ Reply (the worker rewrites it in place)
//	rule = Matcher(dst, proto, port)     no rule ─▶ Drop(no-rule)
//	fragment_tracking and a fragment ─▶ the datagram's remembered backend,
//	                              else place it (first fragment as if whole)
//	tracking key (affinity × mode); SYN rule of "New or existing"
//	entry found and valid ─▶ Tx(its backend)
//	else Maglev(selection hash) over the eligible set ─▶ insert ─▶ Tx
//	eligible set empty ─▶ Drop(no-backend)
//
// Validity of an entry is checked at lookup in O(1) (DESIGN §3 "Entry
// lifetime"): the rule's flush generation (failover switch with draining
// off), the backend's unhealthy generation unless the rule's persistence
// policy keeps the flow, and the backend's drain generation with its
// deadline (draining on removal, CLI drain, draining on failover). Nothing
// walks the table on the packet path. An invalid entry is overwritten by a
// fresh decision (a "replacement entry", which a later recovery of the old
// backend does not remove).
//
// # Decisions where DESIGN is silent
//
//   - Rules: a protocol-specific rule takes precedence over an L3_DEFAULT
//     rule on the same VIP (the order Google Cloud applies to forwarding
//     rules sharing an address); L3_DEFAULT always covers all ports. Packets
//     without ports (non-first fragments, ESP, GRE, ICMP…) match only
//     all-ports rules.
//   - Backend and rule slots are stable across snapshots; the control
//     plane must not reuse a slot before every entry that may name it has
//     expired (drain deadline plus idle timeout).
//   - Echo requests to a VIP are always answered by the appliance, even
//     when an L3_DEFAULT rule covers the VIP (DESIGN §3 "ICMP"). Other ICMP
//     messages to a VIP are forwarded only by an L3_DEFAULT rule, hashed per
//     packet (never tracked).
//   - An ICMP error is routed but never creates an entry nor confirms a
//     SYN's entry (it is no proof the flow is established). Errors quoting a
//     packet whose source is not a VIP are dropped (icmp-not-for-flow).
//   - Fragment tracking (DESIGN §3 "Fragments", beyond GCP): all
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
//   - Table full: a SYN that finds no slot it may take is forwarded by its
//     hash without an entry (counted by conntrack), never dropped.
//
// # Measured
//
// BenchmarkDecide (hit, miss, syn) allocates nothing; see the issue notes
// for the numbers of the latest run. On a shared, loaded VM the wall-clock
// figures are several times the CPU time; the random-access cost of a
// table larger than the caches dominates a hit.
package dataplane
