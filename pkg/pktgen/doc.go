// Package pktgen is xlb's traffic generator: AF_XDP transmit-only
// sockets, one per TX queue, sending frames built from a template, with
// the kernel pktgen's semantics and result lines, for machines without
// CONFIG_NET_PKTGEN (bench/pktgen drives it through `xlb pktgen`).
//
// # Who owns what
//
// [Run] starts one goroutine per thread. Each locks itself to an OS
// thread, pins that thread to CPU (FirstThread+i) mod NumCPU, opens its
// own ring.Socket on TX queue FirstThread+i (pktgen's QUEUE_MAP_CPU) and
// owns the socket, its [Generator] and its sender; nothing is shared
// between threads but the context and the result slot each writes once.
// With Config.Netns the thread enters that namespace itself and is never
// unlocked, so the namespace dies with the thread.
//
// # The packet path
//
// newSender copies the template into every free UMEM chunk once. Per
// packet, [Generator.Next] writes only the source and destination address
// (the low 64 bits for IPv6), the two ports, the IPv4 header checksum and
// the L4 checksum. The checksums are finished from ones' complement sums
// precomputed over everything that never varies (RFC 1624 style: the sum
// of the fixed part plus the new words), so a packet costs a few stores
// and additions whatever its size. sender.Send allocates nothing
// (tested with testing.AllocsPerRun) and makes no syscall; the wake-up
// (sendto) happens only when the kernel asks for it (ring.Rings.KickTX):
// in copy mode it sends at most 32 frames per call on the sender's own
// thread, which is most of the cost on veth.
//
// # Semantics (pktgen's, where it has them)
//
//   - Size is the frame without FCS (pkt_size); 60 is a minimum Ethernet
//     frame. A size below the headers is raised to them (IPv6 UDP 62, IPv6
//     TCP 74) and the result line shows the size sent.
//   - Packets counted (pktgen's sofar) are those the kernel completed.
//     Elapsed runs from the first submission to the last completion; idle
//     is the time slept for the rate limit, busy the rest, as in the
//     kernel's "usec(c…+d…)".
//   - pps = packets × 1e9 / elapsed ns, truncated; bps = pps × 8 × size
//     (no FCS); Mb/sec = bps / 1e6 — net/core/pktgen.c show_results.
//   - errors: TX descriptors the kernel rejected (XDP_STATISTICS) plus
//     failed wake-ups.
//
// # Decisions where pktgen and the design are silent
//
//   - Flows: with Flows > 0 flow i is the i-th tuple in mixed-radix order
//     (source address fastest, then source port, destination address,
//     destination port), not a random tuple as pktgen draws, so N flows
//     are exactly N distinct tuples: 65536 flows over a /16 are 2^16
//     sources, which a conntrack benchmark needs. FlowLen packets go out
//     per flow, flows in turn (FLOW_SEQ), and the cycle repeats.
//   - Without flows every varying field is drawn at random per packet
//     (splitmix64, mapped onto the range by multiplication: no division).
//   - Payload bytes are zero; there is no pktgen header (magic, sequence,
//     timestamp): the samples set NO_TIMESTAMP and the sink only counts.
//   - IPv4: DF set, ID 0, TTL 64. TCP: no options, window 65535, fixed
//     sequence (and acknowledgment) numbers; SYN or ACK only.
//   - No XDP program is needed on the interface: a transmit-only AF_XDP
//     socket binds and sends without one (the XSKMAP is for receiving).
//     On veth the bind falls back to copy mode (Bind "auto"); checked by
//     TestRunOnVeth, which counts every frame at the peer.
//   - Rate limiting works per batch: while less than a batch is due the
//     thread sleeps until a whole batch is (when that is 50 µs or more
//     away; else it sends what is due), so a paced generator leaves the
//     CPU to what it measures. A thread that falls behind sends at most
//     one batch per loop to catch up.
package pktgen
