// Package xsk is the XDP side of xlb's AF_XDP path: the xlb_redirect
// program (redirect.c), its maps, and the Go code that loads it, attaches
// it to an interface, keeps the VIP set and registers each queue's
// AF_XDP socket.
//
// # The program
//
// For every frame on the interface, xlb_redirect parses Ethernet, at most
// one VLAN tag (802.1Q or 802.1ad), then IPv4 or IPv6. IPv6 extension
// headers (Hop-by-Hop, Routing, Destination Options, AH, Fragment) are
// walked with a loop bounded at 8 headers to the transport header; a
// longer chain is looked up as an unknown protocol. If the destination
// matches the VIP set the frame is redirected with
// bpf_redirect_map(&xlb_xsks, rx_queue_index, XDP_PASS) to the socket of
// its receive queue (XDP_PASS is the fallback when the queue has no
// socket); otherwise it is passed to the kernel, so ARP, ND, SSH, BGP and
// the appliance's own health probes keep working. Truncated headers pass.
//
// # Maps and key encoding
//
//	xlb_vips       HASH   struct vip_key (20 B) → u32 (reserved flags, 1)
//	xlb_vip_addrs  HASH   16-byte address → u32 number of xlb_vips entries for it
//	xlb_xsks       XSKMAP u32 queue → AF_XDP socket fd (256 queues)
//
// struct vip_key is {addr [16]byte; port be16; proto u8; pad u8 = 0}:
// addr is the IPv6 address, or the IPv4 address mapped (::ffff:a.b.c.d),
// so one map serves both families; port is the destination port in
// network byte order, 0 meaning all ports; proto is the IP protocol
// number, 0 meaning all protocols. Neither 0 occurs as a real match value
// (port 0 is not a valid destination; protocol 0 is Hop-by-Hop, which the
// walk always steps over). A packet is looked up from most to least
// specific:
//
//	(addr, proto, port)   only for TCP, UDP and SCTP with ports in the packet
//	(addr, proto, 0)      a rule with ports = "ALL"
//	(addr, 0, 0)          an L3_DEFAULT rule
//
// Fragments: a non-first fragment (offset ≠ 0) carries no ports and is
// looked up from the second line on, so only all-ports rules match it, as
// the design requires. A first fragment carries the transport header and
// is matched like a whole packet, so it meets the rule its unfragmented
// twin would.
//
// ICMP: an echo request (ICMP 8, ICMPv6 128) whose destination is any VIP
// address, and an error (ICMP 3, 11, 12; ICMPv6 1–4) whose quoted packet
// has a VIP address as its source, are redirected, whatever the rules'
// protocols: the dataplane answers the echo and routes the error to the
// backend of the quoted flow. xlb_vip_addrs answers "is this a VIP
// address"; the Go side keeps its count in step with xlb_vips (address
// entry written before the rule entry on add, removed after it on
// delete). Other ICMP (and all neighbour discovery) is looked up like any
// protocol without ports, so it reaches the kernel unless an L3_DEFAULT
// rule claims the address.
//
// The Go type VIP is one xlb_vips entry; [Program.ReplaceVIPs] adds the new
// set before it removes what is no longer wanted, so a reload never opens
// a window in which a kept VIP stops matching.
//
// # Attach modes
//
// [Program.Attach] uses a BPF link (link.AttachXDP, kernel 5.9+), so the
// program is detached when the link is closed or the process dies.
// AttachAuto tries native (driver) mode first and falls back to generic
// (SKB) mode; the mode obtained is returned so the daemon can log it.
// veth supports native mode. The interface index is resolved in the
// calling thread's network namespace.
//
// # Ownership
//
// A Program is control-plane state: its methods take an internal mutex and
// may be called from any goroutine. The dataplane never calls it; a VIP
// change reaches the kernel map at once and the workers see its effect as
// packets arriving (or no longer arriving) on their sockets.
//
// github.com/asavie/xdp also has a Program with attach and XSKMAP
// registration, but it builds a fixed program that redirects every packet
// of a queue; xlb needs the VIP filter, so attach and registration are
// done here with cilium/ebpf directly.
//
// # Regenerating
//
// The compiled object (xsk_bpfel.o) and its Go binding (xsk_bpfel.go) are
// committed, so building needs no clang. After changing redirect.c:
//
//	apt-get install -y clang-14 llvm-14 libbpf-dev
//	go generate ./ring/xsk
//
// Only little-endian output is generated (every target xlb supports is
// little-endian); VIP.key relies on that for the port's byte order.
package xsk

//go:generate go tool bpf2go -cc clang-14 -target bpfel -type vip_key xsk redirect.c -- -O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu
