// Package encap turns a client's frame, sitting in an AF_XDP UMEM chunk,
// into the packet for its backend, in place: IPIP, GUE, GRE or Direct
// (L2 rewrite). It also builds the ICMP fragmentation-needed / ICMPv6
// packet-too-big reply when the tunnel packet would exceed the egress MTU,
// and fragments the outer packet when the inner IPv4 packet allows it.
//
// # Ownership and threading
//
// A Template is built once per backend by the control plane (NewTemplate,
// which validates and may allocate), is immutable afterwards and is shared
// by every worker through the dataplane snapshot. Encap, TooBigReply and
// Fragment run on the worker goroutine that owns the frame's queue; they
// keep no state, take no lock, make no syscall and allocate nothing
// (TestEncapAllocatesNothing, TestSlowPathsAllocateNothing). The outer
// IPv4 identification comes from the caller (a per-worker counter), so
// no counter is shared between queues. It matters only for fragments (a
// DF or unfragmented datagram's ID is never used, RFC 6864): workers
// should start their counters at different random values so that two
// queues fragmenting towards one backend do not reuse IDs in step.
//
// # In place
//
// The frame is buf[off:off+n] in its UMEM chunk and Meta (from
// packet.Parse) describes it. The inner IP packet never moves: new headers
// are written into the headroom in front of it and the result starts at
// newOff < off. The most headroom needed is 56 bytes (GUE over IPv6 plus a
// fragment header); AF_XDP chunks have at least 256. Bytes after Meta.L3End
// (Ethernet padding) are dropped by shortening the frame.
//
// # Formats
//
// Ethernet (with the ingress 802.1Q tag, if any, kept) is followed by:
//
//	IPIP   | outer IPv4 (proto 4) or IPv6 (next header 4 or 41) | inner IP packet |
//	GUE    | outer IPv4/IPv6 (17) | UDP sport, gue_port | inner IP packet |
//	GRE    | outer IPv4/IPv6 (47) | 0x0000 | 0x0800/0x86DD | inner IP packet |
//	DIRECT | inner IP packet, unchanged (only the MACs change) |
//
// GUE is "variant 1" (draft-ietf-intarea-gue §4.1): no GUE header, the
// first nibble after UDP is the inner IP version. Linux fou/gue receive
// and pkg/decap accept it. GRE is RFC 2784 with no checksum, key or
// sequence number.
//
// Overheads (bytes in front of the inner IP packet, Ethernet not counted):
//
//	         outer IPv4   outer IPv6
//	IPIP         20           40
//	GUE          28           48
//	GRE          24           44
//	DIRECT        0            0
//
// Inner and outer families: 4in4, 4in6 and 6in6. IPv6 inside IPv4 is not
// supported for any kind (NewTemplate rejects Spec.Inner = IPv6 with an
// IPv4 backend, Encap returns DropFamily): an IPv6 rule needs IPv6
// backends. Reason: an IPv4 path gives IPv6 no guaranteed 1280-byte MTU
// and makes the tunnel's MTU and ICMP rules mix families; Katran and GLB
// don't carry it either.
//
// # Per-packet fields
//
// The template holds Ethernet (next-hop MAC, our MAC), the outer IP header
// (our address, the backend's, TTL/hop limit 64) and the UDP/GRE header.
// Per packet: one copy of the template and these writes:
//
//   - DSCP and ECN: copied from the inner TOS / traffic class (RFC 2983
//     uniform DSCP; RFC 6040 normal mode copies ECN).
//   - Lengths: IPv4 total length / IPv6 payload length, UDP length.
//   - IPv4 ID: the caller's per-worker counter. DF: copied from the inner
//     IPv4 header (an IPv4 outer always carries IPv4, so "IPv6 inner: DF
//     set" never arises).
//   - IPv4 checksum: the template's partial sum of the constant words
//     plus the four varying ones, folded; 20 bytes are never re-summed.
//   - IPv6 flow label: the flow hash folded to 20 bits (RFC 6438), so
//     routers between us and the backend hash tunnelled flows apart.
//   - GUE source port: 49152 | fold(flow hash) & 0x3fff, the ephemeral
//     range of RFC 6335, as Linux's fou and vxlan choose it; one flow
//     always gets one port, so the backend's RSS spreads flows and keeps
//     each on one queue. fold: h ^= h>>32; h ^= h>>16.
//   - GUE over IPv4: UDP checksum 0 (allowed by RFC 768; the inner
//     packet carries its own checksums).
//   - GUE over IPv6: the UDP checksum is mandatory (RFC 8200 §8.1; normal
//     sockets drop zero). For an unfragmented TCP segment, or UDP datagram
//     with a checksum that fills the packet, after any IPv4 header or a plain
//     IPv6 header, it is computed with local checksum offload: a segment
//     whose checksum is valid sums to the complement of its pseudo-header
//     sum, so only addresses and the IPv6 header are read. Anything else
//     (ICMP, fragments, UDP without checksum, IPv6 extension headers) is
//     summed in full; the offload is several times cheaper for a full-size
//     packet (BenchmarkEncap; bench/README.md). If a client sends a TCP/UDP
//     segment with a wrong checksum, the offloaded outer checksum is wrong
//     too and the backend's kernel drops the datagram one layer earlier than
//     it would have dropped the segment: the same outcome.
//   - GRE protocol type and the IPv6 next header of IPIP follow the inner
//     family.
//
// The inner packet is not changed: its TTL is not decremented, as Katran,
// GLB and GCP's passthrough balancer do; the balancer is not a router hop.
// Direct rewrites the destination MAC to the backend's and the source MAC
// to ours and leaves the rest, VLAN tag included, as it arrived.
//
// VLAN: the egress is the ingress interface (one-armed), so the reply
// leaves on the VLAN the router reached us on, with the tag's priority.
// QinQ frames never get here (packet.Parse passes them to the kernel).
//
// # MTU policy
//
// Spec.MTU is the egress L3 MTU (default 1500): the tunnel packet, outer
// header included, must fit. NewTemplate requires at least 576 with an
// IPv4 outer header, and 1280 + overhead with an IPv6 one (an IPv6 tunnel
// must pass 1280-byte inner packets, RFC 8200 §5). When overhead + inner
// length > MTU:
//
//   - IPv4 with DF, or IPv6: Encap rewrites the frame into an ICMP
//     fragmentation-needed (type 3 code 4) or ICMPv6 packet-too-big (type 2)
//     to the client, announcing MTU − overhead (1480 for IPIP at 1500, 1472
//     GUE, 1476 GRE; IPv6 1460/1452/1456), and returns TooBig. The worker
//     transmits it and counts "packet-too-big".
//   - IPv4 without DF: Encap returns NeedFragments with the frame untouched;
//     the worker takes FragmentCount−1 spare frames and calls Fragment,
//     which fragments the outer packet (RFC 2003 §5.1; with an IPv6 outer
//     header an IPv6 fragment header, RFC 2473 §7.1). The first fragment is
//     built in place and carries the UDP/GRE header; the others are copied
//     into the spare frames. All share one ID (IPv6: flow-hash bits 48..63
//     above the 16-bit ipID). The backend reassembles before decapsulating.
//   - Direct never fragments (the frame came in on the interface it leaves
//     by, so it fits unless Spec.MTU is set below the link's); too big
//     without DF is DropTooBig.
//
// The ICMP reply (TooBigReply, also usable alone):
//
//	Ethernet: to the frame's source MAC (the router that delivered it, the
//	          way back to the client), from our MAC, ingress VLAN kept
//	IPv4:     TOS 0xc0, ID from the caller, no DF, TTL 64, proto 1,
//	          from the VIP (the address the client sent to: always routable
//	          back, and the address its path-MTU cache is keyed on) to the
//	          client
//	ICMP:     type 3 code 4, next-hop MTU, then the original packet from
//	          its IP header, as much as fits in 576 bytes (RFC 1812
//	          §4.3.2.3; more than the 28 of RFC 792 and Katran's 98)
//	IPv6:     traffic class 0xc0, hop limit 64, next header 58, VIP > client
//	ICMPv6:   type 2 code 0, MTU (at least 1280), then as much of the
//	          original as fits in 1280 bytes (RFC 4443 §2.4(c))
//
// The quote is the original packet where it lies: the reply's headers are
// written in front of it, nothing is copied. No error is sent about an ICMP
// error, a non-first fragment, or a packet from an unspecified, loopback,
// multicast or broadcast source (RFC 1122 §3.2.2, RFC 4443 §2.4(e)):
// those are DropTooBig.
//
// # Results and counters
//
// Result values map onto the dataplane's reasons: OK → Tx; TooBig → Tx of
// the reply, counted as packet-too-big; NeedFragments → Fragment, then Tx
// of every fragment; DropTooBig → drop, packet-too-big; DropNoHeadroom,
// DropFamily, DropBadMeta → drop, encap-failed. Every non-OK, non-TooBig
// result leaves the frame exactly as it was.
package encap
