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
// its receive queue; otherwise it is passed to the kernel, so ARP, ND,
// SSH, BGP and the appliance's own health probes keep working. Truncated
// headers pass.
//
// When the queue's XSKMAP slot is empty (bpf_redirect_map with flags 0
// returns XDP_ABORTED instead of XDP_REDIRECT), the queue's entry in
// xlb_ctl decides: NOSOCK_DROP on the queues the daemon serves, whose
// socket is missing only between two owners (a restart, a crash), so a
// VIP packet costs the client a retransmit instead of the kernel's reset
// (or a forward, with ip_forward on); NOSOCK_PASS (the initial 0) on the
// others. Each outcome is counted per queue and CPU in xlb_nosock.
//
// # Maps and key encoding
//
//	xlb_vips       HASH   struct vip_key (20 B) → u32 (reserved flags, 1)
//	xlb_vip_addrs  HASH   16-byte address → u32 number of xlb_vips entries for it
//	xlb_xsks       XSKMAP u32 queue → AF_XDP socket fd (256 queues)
//	xlb_ctl        ARRAY  u32 queue → no-socket action (0 pass, 1 drop)
//	xlb_nosock     PERCPU_ARRAY u32 queue → {dropped, passed u64}
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
//	(addr, 0, 0)          an L3_DEFAULT rule, or every VIP address when
//	                      the daemon drops unmatched VIP traffic (the
//	                      workers then count what no rule claims)
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
// [Program.Attach] uses a BPF link (link.AttachXDP, kernel 5.9+). A
// program from [Load] is detached when the link is closed or the process
// dies.
// AttachAuto tries native (driver) mode first and falls back to generic
// (SKB) mode; the mode obtained is returned so the daemon can log it.
// veth supports native mode. The interface index is resolved in the
// calling thread's network namespace.
//
// # Pinning: state that outlives the process
//
// The daemon uses [OpenPinned] with the interface's directory
// ([PinDir]: /sys/fs/bpf/xlb/<ifname>, or
// /sys/fs/bpf/xlb/netns-<cookie>/<ifname> outside the network namespace
// of PID 1, since one bpf filesystem serves every namespace and interface
// names repeat; the bpf filesystem is mounted on /sys/fs/bpf when
// nothing is). The directory holds the link ("link") and every map under
// its own name. A pinned link keeps the program attached after its
// process exits (a pinned map alone would not); the sockets in
// xlb_xsks do not outlive their last fd (the kernel empties their slots),
// which is what the no-socket action is for.
//
// OpenPinned finds one of three situations ([Reuse]): nothing (or stale
// pins: a link of another interface or of a vanished one, removed with
// the reason), so Attach attaches and pins; a link and maps of this
// layout, which the new owner shares with the previous one (VIP set,
// sockets, counters stay in force), and Attach swaps the program into the
// link with BPF_LINK_UPDATE, atomic at the hook; or a link with maps of
// another layout (an upgrade changed a map), in which case fresh maps get
// the old VIP set and no-socket actions, the caller registers its
// sockets in the new XSKMAP (an XSKMAP cannot be read from user space),
// and Attach swaps the program in and re-pins the new maps. Until Attach,
// nothing in force changes, so a previous owner keeps serving while its
// successor prepares. The VIP set of reused maps is read back, and
// xlb_vip_addrs made to agree with it, so the next ReplaceVIPs removes
// what a new configuration drops.
//
// [Program.Release] closes the program's fds and leaves pins and
// attachment in place (a restart, a hand-over); [Program.Close] and
// [Program.Detach] unpin and detach (xlb stop); a program that found a
// pinned link and never swapped itself in only lets go of the link, so a
// successor that gives up cannot detach its predecessor. [RemovePins]
// does what Close does for pins nobody holds (xlb stop without a daemon).
// After a crash the program stays attached, dropping VIP packets of the
// served queues, until the next daemon takes over or xlb stop.
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
// A change to a map's key, value or size is a layout change for
// OpenPinned: an upgrade then moves to new maps (above). Keep them stable
// where possible; add maps rather than change them.
//
// Only little-endian output is generated (every target xlb supports is
// little-endian); VIP.key relies on that for the port's byte order.
package xsk

//go:generate go tool bpf2go -cc clang-14 -target bpfel -type vip_key -type nosock_counts xsk redirect.c -- -O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu
