// Package decap is the backend-side decapsulator for hosts whose kernel has
// no IPIP, GRE or FOU modules (`xlb decap`). It receives what the appliance
// sends a backend, strips the outer headers and writes the inner packet,
// whose destination is the VIP, to a TUN device, so the kernel delivers it
// to the sockets bound to the VIP exactly as if it had arrived directly.
// Replies do not come back through decap: they leave the backend with
// source = VIP and go straight to the client (direct server return).
//
//	appliance ──IPIP/GRE/GUE──▶ eth0 ─▶ raw / UDP socket ─▶ reader goroutine
//	                                                           │ strip outer
//	                                                           ▼
//	   server socket bound to VIP ◀── kernel input ◀── TUN queue (xlbdecap0)
//	   reply: src=VIP, dst=client ──▶ default route ──▶ client
//
// # What is received where
//
//   - IPIP: IPv4 raw sockets for protocols 4 (4in4) and 41 (6in4), which
//     deliver the outer IPv4 header too (it is skipped by its IHL); IPv6 raw
//     sockets for next headers 4 (4in6) and 41 (6in6), which deliver only
//     what follows the IPv6 header.
//   - GRE: raw sockets for protocol 47 on IPv4 and IPv6. The header is the
//     base 4 bytes plus 4 for each of the checksum, key and sequence flags
//     (RFC 2784/2890); a present checksum is verified; version ≠ 0, the
//     obsolete routing flag and protocol types other than 0x0800/0x86DD are
//     dropped.
//   - GUE: one UDP socket (dual-stack unless IPv4Only), default port 6080.
//     Variant 1 (the inner IP header right after UDP, what xlb sends, what
//     Linux's fou/gue receive path accepts) is recognised by its version
//     nibble 4 or 6; variant 0 data messages (Proto 4/41, Hlen option words
//     skipped) are accepted too; control messages are dropped.
//
// The inner packet must be a well-formed header of the version the outer
// header announces, and is trimmed to its own length before the write.
// Everything else is dropped and counted by [DropReason]; [Decap.Counters]
// reads the counters from any goroutine.
//
// # Ownership and goroutines
//
// [Start] creates the TUN and every socket inside Options.Namespace (a
// [netns.NS.Do] on the calling goroutine), and only then starts one reader
// goroutine per socket: goroutines never inherit a namespace, sockets do.
// Each reader owns its socket, its own queue of the multi-queue TUN
// (IFF_MULTI_QUEUE, so no two readers share a file descriptor) and one
// 64 KiB buffer; its counters are atomics written only by it. The per-packet
// work ([reader.handle]) allocates nothing and takes no lock; the sockets
// and the TUN are non-blocking files on the Go poller, so a blocked Read
// parks a goroutine, not a thread, and [Decap.Close] unblocks it by closing
// the socket.
//
// # Host configuration (unless NoHostConfig)
//
//   - rp_filter = 0 on the TUN and on "all": the inner source is the
//     client, whose route points out of eth0, so strict reverse-path
//     filtering would drop every packet; the kernel applies max(all, dev).
//     rp_filter is left at 0 on Close (restoring it under a running server
//     would silently break it if two decaps share a host).
//   - The VIPs are added to lo (/32, /128) unless already present; Close
//     removes those it added. An IPv6 VIP is added without duplicate
//     address detection (nodad), so it is never tentative: a server can
//     bind it as soon as Start returns.
//   - The TUN gets MTU 65535 (it only receives; a smaller MTU would not
//     limit input anyway, but keeps tools from misreading it) and is brought
//     up. It has no address: the kernel needs none to accept input on it.
//
// # Decisions where the design is silent
//
//   - 6in4 is accepted alongside 4in4, 4in6 and 6in6 (one more socket;
//     the kernel-native ipip/sit devices accept it too).
//   - A zero-length datagram (reported by os.File as EOF) counts as
//     truncated; more than 1000 consecutive read errors stop the reader
//     and make Close return the error (no silent spin).
//   - Outer IPv4 padding beyond the total length is ignored; inner padding
//     is trimmed.
//   - Tunnel packets are accepted from any outer source, as the kernel's
//     fallback tunnel devices (tunl0, gre0) accept them: anyone who can
//     reach the backend can inject packets with any inner source. Restrict
//     the outer source to the appliances with a firewall rule; decap does
//     not read the sender's address (that would cost a recvfrom and its
//     sockaddr per packet).
//   - One decap per namespace: the TUN is created exclusively
//     (IFF_TUN_EXCL), because a second decap's raw sockets would receive
//     the same packets and deliver them twice.
//   - One read and one write system call per packet: decap serves a
//     backend's share of the traffic, not the appliance's, and the TUN
//     takes one packet per write anyway (batching reads with recvmmsg is
//     the next step if a backend ever needs it).
//
// decaptest builds the packets this package receives, for its tests and
// for pkg/lab's.
package decap
