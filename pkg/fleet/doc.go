// Package fleet shares flow state between the appliances of a fleet, so
// that a flow the routers move from one appliance to another keeps its
// backend even when the Maglev tables alone would not put it back there.
//
// # What is shared: exceptions
//
// Every appliance of a fleet computes the same Maglev tables (same
// configuration, seed and health view), so a flow that the routers move
// reaches an appliance that picks the same backend, as long as the flow
// is on the backend the tables pick today. An exception is a tracked flow
// for which that is not true: its backend differs from what its rule's
// table picks for it now, or the table no longer picks it at all (a
// backend added or removed since the flow began, a weight changed, a
// backend unhealthy with the flow persisting on it, a drain, a failover
// with draining). Only exceptions are sent. Flows on their pick need no
// message.
//
// Rule slots and backend slots are local to one appliance (each hands
// them out in its own order), so a record names its rule by RuleID (XXH64
// of the rule's name) and its backend by its address; the receiver maps
// both to its own slots and drops (and counts) a record naming a rule or
// backend it does not have.
//
// # Where exceptions come from
//
// Every placement xlb makes is the table's pick: failover, draining,
// zones, preferred groups and weights are all in the tables the workers
// look up (pkg/dataplane's Snapshot.Pick is that choice, and a test holds
// Decide to it for every affinity and mode). So a new flow is never an
// exception when it is placed; flows become exceptions when the tables
// change under them, and an entry copied from a peer is one when it
// arrives. The workers find them (pkg/dataplane exceptions.go): after a
// table change a pass over every live entry judges each (its rule's pick
// against its backend) and marks the exceptions; every Refresh a pass over
// the marked entries hands them over again with their time to live; a SYN
// that takes an exception's tuple clears the mark, and the next pass
// leaves it out. The PER_SESSION session table, shared by the queues, is
// walked by the node itself every Refresh and after a table change.
//
// # Goroutines and the hand-off
//
// A worker hands what its scan finds to the node through its own bounded
// single-producer single-consumer ring (pkg/spsc): a push is two atomic
// operations and a copy, no lock, no syscall, no allocation; a full ring
// stops the scan where it is until the next batch (counted: HandoffFull),
// so nothing is lost and nothing waits. The packet path itself gains one
// lookup of the peer table on a local miss (below) and nothing else.
//
// The node runs two goroutines: one reads the UDP socket into a bounded
// queue (when the queue is full it waits, and the socket's 8 MiB buffer
// holds the rest; what the kernel drops beyond that is counted, Backlog),
// the other owns every piece of state: it drains the workers' rings every
// 20 ms, keeps the exceptions this appliance owns (a map by rule and
// tracking key), sends, receives, answers status requests, and is the
// only writer of the peer table.
//
// # What a peer does with them
//
// A received exception becomes an entry of the peer table (a conntrack
// Shared table of max_exceptions slots, with a presence filter), stamped
// with this appliance's generations for the backend (so it is valid under
// this appliance's own health and drain view; a flow the sender drains
// off a backend that drains here too ends at this appliance's deadline),
// living the time the sender's entry has left, at most the rule's idle
// timeout. A worker whose table has no entry for a flow looks it up there
// before Maglev places it; a valid one decides and is copied into the
// worker's table, marked as from a peer and as an exception, so the flow
// hits locally from then on and this appliance refreshes it to the other
// peers: the owner of an exception is whoever carries the flow. A SYN that
// re-selects never looks. The presence filter (one bit per hash value,
// rebuilt from the live entries every 30 s) keeps a miss for a flow no
// peer sent at a hash and one load of a 256 KiB array.
//
// An owned exception is sent when it is new, when its backend changed,
// and when its deadline moved since it was last sent (the flow carried
// traffic), so a peer's copy expires within a second of the owner's
// entry and lives while the flow does: a peer holds exactly the live
// exceptions, give or take a Refresh. One that a pass no longer sees (its
// entry expired, was flushed, or is no exception any more) is withdrawn: a
// withdrawal removes a copy that names the same backend and expires no
// later than the withdrawn one (plus a second), so the withdrawal of an
// appliance the flow left long ago does not remove the copy the flow's new
// owner keeps refreshing.
//
// # Joining
//
// A node starts by asking every peer for all its exceptions (a sync
// request in its HELLO); each answers with RECORDS carrying the request's
// id and a SYNC_END with their count, and the node is joined when every
// peer answered completely or JoinTimeout passed (logged, counted,
// Status.JoinTimedOut). The daemon's BGP gate waits for it before it
// announces any VIP (pkg/daemon bgp.go), and asks again on undrain (Join).
// A node also asks a peer for everything whenever it proves a new epoch of
// it (the peer restarted, or this is the first contact), and again when a
// sync's count comes up short or its end does not arrive within three
// heartbeats.
//
// # Messages
//
// UDP datagrams between configured peers, one port for the fleet, at most
// MaxDatagram (1400) bytes. wire.go has the layout: a 56-byte header
// (magic, version, type, body length, the sender's epoch, a sequence per
// receiver, the sender's and receiver's fleet addresses), the body, and a
// 16-byte tag, HMAC-SHA256 over header and body under the fleet key cut
// to 128 bits (stdlib crypto; the key file's first line signs, every line
// verifies, for rotation: config.ReadFleetKeys). Three types: HELLO every
// Heartbeat (a challenge, the echo of the peer's challenge, a sync
// request, the count of owned exceptions), RECORDS (up to 41 IPv4 records of 32 bytes, 68 for IPv6),
// SYNC_END. A record is flags, tuple kind, protocol, rule id, time to live
// in milliseconds, the flow's addresses and ports and the backend's
// address.
//
// Replay protection: each process draws a random epoch; a receiver
// believes an epoch of a peer only when a HELLO of it echoes a fresh
// challenge nonce the receiver sent, so a datagram recorded from any other
// epoch (before the peer restarted, before this node started) is never
// applied; within the believed epoch a 256-sequence window (RFC 4303's)
// refuses repeats and anything older. A datagram that is truncated,
// malformed, of another version, fails authentication, is replayed, comes
// from an unproven epoch, from no configured peer, or is addressed to
// another appliance is dropped and counted by reason (per peer when it
// names one), and nothing of it is applied; the decoder is fuzzed
// (testdata/fuzz/FuzzDecode) and the encoder checked against golden
// datagrams (testdata/golden).
//
// The records are not encrypted: they carry client addresses and ports
// that every router between the appliances sees anyway; what matters is
// that nobody else can make an appliance send a flow somewhere.
//
// # Why exceptions only, and how it compares
//
// IPVS's sync daemon (ip_vs_sync.c) sends every connection from a master
// to backups (multicast or unicast UDP, no authentication, a sync id to
// filter), by default after a connection's third packet and every 50th
// after, with its state and timeout in 36-byte IPv4 records: state
// follows the connection, because an IPVS backup has no consistent hash
// to fall back on. OpenBSD's pfsync sends every state change of the packet
// filter (insert, update, delete; multicast, protected by IPsec if at
// all), merges updates to one state, and asks for a bulk update when it
// starts, holding CARP's demotion until it arrived: the same "join before
// taking traffic" as here. GLB Director keeps no state on its directors
// at all: each table row names a primary and a secondary backend, and a
// kernel module on every backend forwards packets of flows it does not
// know to the other ("second chance"), which covers one change per row
// at a time and needs code on the backends. xlb's appliances already
// agree on every flow's placement through the shared tables, so only the
// flows the tables no longer place are worth a message, and nothing runs
// on the backends.
//
// The cost of the two designs is measured by BenchmarkSyncTraffic (and
// bench/README.md): per record the same encode, authenticate, send,
// verify and apply, so the traffic and CPU follow the number of records.
// With exceptions only, 100 000 exceptions on active flows cost 100 000
// records per Refresh (10 000 a second at 10 s) and nothing for idle
// ones; sharing every new flow at 100 000 new flows a second costs
// 100 000 records a second whatever happens to the tables, ten times
// more, plus a push on the packet path per new flow. Both rates are
// delivered on two vCPUs (bench/README.md has the runs): at about 2 µs of
// CPU per record on each end, 100 000 exceptions cost about 265
// datagrams, 340 KB and a tenth of a core a second per peer, and 100 000
// new flows a second cost 2 470 datagrams, 3.4 MB and a fifth of a core
// on each end per peer. A table change that makes many flows
// exceptions at once sends them in a burst bounded by SendRate: that is
// the window in which the exceptions design is behind.
//
// # What it cannot save
//
//   - Two appliances that die within one send of each other's exceptions
//     (a table change, then both die before the burst went out): their
//     exceptions are lost with them.
//   - Exceptions beyond max_exceptions: the peer table evicts the entries
//     closest to expiry.
//   - Appliances whose tables disagree (a reload applied on one and not
//     yet on another, a health check seen at different times): flows placed
//     in that window are picks on one appliance and not on the other, and
//     nobody sends them. Keep configuration changes simultaneous.
//   - Updates lost to a partition: an exception whose flow carries traffic
//     is sent again within Refresh; one that stays idle is not.
//   - Fragment tracking entries (5 s) are not shared.
package fleet
