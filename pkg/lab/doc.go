// Package lab builds the network-namespace testbed used by `xlb lab
// up|down|demo`, the end-to-end tests and the benchmarks: a client with
// hundreds of source addresses, a router, the appliance (one-armed, one
// multi-queue veth) and N backends running real HTTP and UDP echo servers
// bound to the VIPs, answering clients directly (DSR).
//
// # Topology (prefix "xlb-", 3 backends)
//
//	 ns xlb-client                 ns xlb-router                     ns xlb-xlb (appliance)
//	┌──────────────────┐  MTU    ┌─────────────────────────────┐   ┌─────────────────────┐
//	│ eth0             │  1500   │ cl0            br0 (bridge) │   │ eth0 (Queues rx/tx) │
//	│ 198.51.100.2-254 ├─────────┤ 198.51.100.1   198.18.0.1   │   │ 198.18.0.2          │
//	│ fd00:51::2-…     │         │ fd00:51::1     fd00:18::1   │   │ fd00:18::2          │
//	│ default → .1     │         │  routes:          │ lb0 ────┼───┤ default → .1        │
//	└──────────────────┘         │  VIPs → 198.18.0.2│         │   │ 198.18.1.0/24 → .1  │
//	                             │  198.18.1.10x/32  │ be0 ──┐ │   └─────────────────────┘
//	                             │   → 198.18.0.10x  │ be1 ─┐│ │         MTU 3500 on the
//	                             └───────────────────┴──────┼┼─┘         whole bridge
//	        ┌───────────────────────────────────────────────┘└──────────┐
//	 ns xlb-be1 …                                  ns xlb-be0
//	┌──────────────────────────────────────┐     ┌──────────────────────────────────────┐
//	│ eth0 198.18.0.100 fd00:18::100       │ …   │ lo: 203.0.113.10 fd00:203:113::10    │
//	│ lo:  198.18.1.100 fd00:18:1::100     │     │     (VIPs), 198.18.1.100 (tunnel)    │
//	│ xlbdecap0 (TUN, pkg/decap)           │     │ HTTP :80 and UDP echo :7 on the VIPs │
//	│ default → 198.18.0.1 (replies: DSR)  │     │ health :8080 on every address        │
//	└──────────────────────────────────────┘     └──────────────────────────────────────┘
//
// One bridge serves every encapsulation:
//
//   - DIRECT (MAC rewrite): appliance and backends share the bridge; the
//     rule lists the backends' link addresses (198.18.0.100+i), whose
//     MACs the appliance resolves on eth0. Backends carry the VIPs on lo
//     with arp_ignore=1 and arp_announce=2, so only the appliance is ever
//     resolved for a VIP (the router routes the VIPs to it anyway).
//   - IPIP, GUE, GRE (L3): the rule lists the backends' tunnel addresses
//     (198.18.1.100+i on lo), which the appliance reaches only through the
//     router (route 198.18.1.0/24 via 198.18.0.1; the router has a /32 per
//     backend via its link address). The router hairpins these packets out
//     of the bridge they came in on, so it sends no ICMP redirects
//     (send_redirects=0) and the appliance ignores IPv6 redirects
//     (accept_redirects=0). Each backend runs pkg/decap in-process: its
//     sockets and TUN are created in the backend's namespace.
//
// Replies leave a backend with source = VIP through its default route, the
// router, and reach the client directly (DSR): the appliance never sees
// them. Backend.Stats counts what the servers and decap handled.
//
// # Address plan (only documentation and benchmark ranges)
//
//	client link   198.51.100.0/24  fd00:51::/64    router .1/::1, clients .2…
//	more clients  198.19.0.0/16    (in fd00:51::/64) client addresses past the 253rd, /32s routed to .2
//	fabric        198.18.0.0/24    fd00:18::/64    router .1, appliance .2, backend i .100+i / ::100+i (hex)
//	tunnel (lo)   198.18.1.0/24    fd00:18:1::/64  backend i .100+i / ::100+i (hex)
//	VIPs          203.0.113.10     fd00:203:113::10 (Options.VIP4, VIP6)
//
// MTUs: FabricMTU (default 3500) on the bridge, its ports, the appliance
// and the backends; ClientMTU (default 1500) on the client link. A client
// datagram larger than 1500 leaves the client in fragments, which the
// fabric carries unchanged. A reply larger than the client link needs
// path-MTU discovery: the router's ICMP "too big" about it is addressed to
// the VIP, so it reaches the appliance, whose job is to route it to the
// backend of the quoted flow (docs/design.md#icmp).
//
// Names: every namespace is Prefix + "client", "router", "xlb", "be0"….
// Interfaces have fixed names (eth0 in client, xlb and backends; br0, cl0,
// lb0, be<i> in the router), which cannot collide because each lives in a
// namespace of its own lab. Parallel labs need different prefixes.
//
// # What runs where, and lifetime
//
// Up runs ip(8) (in -batch mode per namespace, so hundreds of client
// addresses cost one process) and writes sysctls from a thread switched
// into the namespace. The backends' servers and decapsulators are
// goroutines of the calling process: their sockets were created inside
// NS.Do and carry the namespace, the goroutines do not need it. The lab
// therefore works while that process lives; `xlb lab up` must stay in the
// foreground. Close stops servers and decapsulators and deletes every
// namespace (veths and bridge die with them); Up does the same when any
// step fails or ctx ends; Down(prefix) deletes the lab's leftover namespaces
// (only the names Up creates, listed by Namespaces) after a
// crash. IPv6 duplicate address detection is off in every namespace, so no
// address is tentative when Up returns.
//
// Client helpers run inside the client namespace: HTTPClient/HTTPGet dial
// inside Client.Do, bound to the chosen source address (keep-alives off:
// one request, one connection, one flow); ListenUDP, UDPExchange and
// UDPWho do the same for UDP. A UDP datagram starting with "WHO?" is
// answered with a JSON Reply (backend, client address seen, VIP, size
// received) instead of an echo, for the fragmentation tests.
//
// # Stand-in forwarder
//
// Until xlb runs in the xlb namespace, KernelForward(backends...) makes
// the appliance's kernel route the VIPs to the given backends' link
// addresses (ECMP with the 5-tuple multipath hash when there are several):
// no encapsulation, the kernel rewrites the MAC as DIRECT does. The
// tests of this package and Demo without a Start function use it. A real
// forwarder must call StopKernelForward first (or never call
// KernelForward).
//
// # A fleet (fleet.go)
//
// Options.Appliances = N (or BGP) builds N appliance namespaces, Prefix +
// "xlb", "xlb1", "xlb2"…, each with eth0 at 198.18.0.2+i / fd00:18::2+i on
// the bridge (router ports lb0, lb1, …). The router then runs BIRD 2
// (Debian bird2; Up fails with ErrNoBIRD when it is missing) as a child of
// the process that called Up, with BIRDConfig: AS 65000, an eBGP session
// per appliance (AS 65001) and family, hold 3 s / keepalive 1 s, fast
// connect and error waits, VIP host routes imported, nothing exported, and
// one kernel protocol per family with "merge paths on", so each VIP gets
// one route with a next hop per announcing appliance. The router hashes
// with fib_multipath_hash_policy 3 and fields 0x37 (addresses, protocol,
// ports): policy 1 would use the random socket hash that local TCP carries
// over veth, so each connection would pick an appliance at random
// (measured in the fleet prototype). There is no static VIP route: until an appliance
// announces, the VIPs are unreachable. WriteConfig adds the matching [bgp]
// table (BGPConfig). RouteNexthops/WaitNexthops read the router's route,
// CountSYNs/SYNs count new connections per appliance with nftables
// counters on the route's next hop, ApplianceRouteGet predicts a flow's
// appliance (ip route get … iif), Birdc and BIRDLog reach BIRD. Close
// stops BIRD; Down also stops a BIRD (or zebra, bgpd) left in a namespace
// it deletes.
//
// With Options.Fleet, WriteConfigOn adds [fleet] to each appliance's
// configuration (FleetConfig): its fabric address, every appliance of the
// lab as a peer, the lab's key file (FleetKey, no secret), a join timeout
// of 3 s (tests start appliances one by one: a peer not started yet holds
// a join that long) and a refresh of 5 s. The appliances reach each other
// over the bridge; the XDP program passes their datagrams to the kernel.
//
// Options.Router = RouterFRR (`xlb lab … --router frr`) runs FRR instead
// (frr.go; Debian frr, ErrNoFRR when missing): zebra, then bgpd with
// FRRConfig, the configuration deploy/fleet.md shows (a test renders the
// template with that page's addresses and compares), same AS numbers,
// timers and hash policy as BIRD; "maximum-paths 16" is FRR's multipath
// switch and zebra installs one route per VIP through a kernel next-hop
// group (nhid). No systemd, no /etc/frr: both daemons run in the router
// namespace as children of the process that called Up, with their
// configuration, pid files, vty sockets (--vty_socket), zebra's API
// socket (-z) and logs in one temporary directory per lab. They run as
// user frr, which owns that directory: zebra refuses to run as root unless
// root is in the frrvty group, and the lab does not change the system's
// groups. Vtysh and FRRLog reach them; RouterReport gives the sessions and
// log tail of whichever daemon runs, for failure messages.
//
// # Decisions where the design is silent
//
//   - One topology, not two: the DIRECT and L3 paths coexist, so one lab
//     can run rules of every encapsulation at once.
//   - Health endpoints listen on [::]:8080 in each backend (link, tunnel
//     and VIP addresses alike), answer 200 or 503 (SetHealthy) and send
//     X-Load-Balancing-Endpoint-Weight when SetWeight(w ≥ 0) was called.
//   - At most 1000 client addresses per family (253 on the client /24, the
//     rest from 198.19.0.0/16) and 150 backends (.100–.249), checked by Up.
//   - The appliance's veth has Queues RX and TX queues on both ends, so
//     the router side can spread over the same number of queues. A flow's
//     queue is then the client socket's random hash, which TCP redraws
//     after a retransmission timeout: the client namespace sets
//     net.core.txrehash = 0 so that a flow keeps its queue (as a NIC's RSS
//     over the headers does), and its tracked entry, across a daemon's
//     restart pause.
//   - Checksum offload, TSO and GSO are off on the router's end of the
//     appliance's veth (lb0) unless KeepOffloads: over veth the kernel
//     passes packets whose checksum is only the pseudo-header sum and
//     64 KB super-segments, which a raw-frame forwarder would relay broken
//     to the backends. Set with the ethtool ioctl (no ethtool binary needed).
//   - The fabric MTU is 3500 by default, not a data centre's 9000: a veth
//     runs native XDP only while a frame fits one page with the XDP
//     headroom (MTU ≤ ~3500) unless the program is frags-aware, and in
//     generic mode every packet arrives on queue 0, so the lab's second
//     queue would never be used. --fabric-mtu 9000
//     still builds a jumbo fabric; xlb then logs why it runs generic.
//   - Rule.Groups writes several [[group]] tables (roles, zones, capacity
//     scalers, preferred groups); Backend.SetWeightText sends a malformed
//     weight header (INVALID_WEIGHT).
package lab
