// Package probepath sends health probes through the data path
// (docs/design.md#data-path-probes): a probe goes to the rule's VIP and the
// check's port and reaches the backend inside the same encapsulation, with
// the same template and next hop, as a client's packet a worker forwards;
// the backend answers from VIP:port to the appliance's own address by
// direct server return, and the kernel hands that answer to the probe's
// socket. A backend that would drop the VIP's packets (no VIP on its
// loopback, no decapsulation, a firewall rule for the VIP) fails its
// check. It owns a TUN device, two policy rules, a packet socket on the
// interface and the registry of its probes' local ports; it decides which
// backend each probe packet is for and how it leaves.
//
// # How a probe travels
//
//	pkg/health prober ── Dial(tcp|udp, rule/backend) ──▶ kernel socket
//	    SO_MARK = mark, bound to the appliance's address, connect(VIP:port);
//	    its 4-tuple registered to (rule, backend)
//	        │ policy rule "fwmark mark lookup mark" (priority 1000):
//	        │ the table's only route: default dev xlbprobeN
//	        ▼
//	TUN xlbprobeN ──read──▶ reader goroutine
//	    parse (pkg/packet) → registry[protocol, 4-tuple] → target
//	    → Routes(target): the VIP and the backend's template as published to
//	      the workers → Encap (pkg/encap) with the flow hash a worker computes
//	      (GUE source port, IPv6 flow label) ──write──▶ AF_PACKET on the interface
//	        │
//	        ▼
//	backend: decapsulates, the VIP on its loopback takes the packet, the server
//	answers from VIP:port to the appliance's address, by its own route
//	        │
//	        ▼
//	appliance interface: the XDP program passes it (its destination is no VIP)
//	→ kernel → the probe's socket (its 4-tuple) → the prober's Read
//
// Probes are ordinary kernel sockets, so every check kind of pkg/health
// (HTTP, HTTPS, HTTP2, TCP, SSL, GRPC, UDP, PROXY v1 lines) works through
// the path unchanged: the kernel does TCP, Go's TLS, HTTP/2 and gRPC
// clients run on top, and the PROXY line names the connection the backend
// sees (appliance address and port to VIP:port).
//
// # Ownership and goroutines
//
// Open and Close run on the caller's goroutine (the daemon's control
// goroutine); they make and remove everything on the host inside
// Options.Namespace. The reader goroutine alone reads the TUN, encapsulates
// and writes the packet socket; it owns its buffer, its Meta and the outer
// IPv4 identification counter. Dial runs on probers' goroutines (gRPC's
// for GRPC) and touches only the registry (an RWMutex) and its own
// socket. Routes is the caller's and is called from Dial and the reader.
//
// # Ports
//
// A TCP probe socket is bound to the appliance's address with
// IP_BIND_ADDRESS_NO_PORT, so the kernel picks its port at connect, unique
// per 4-tuple as for any unbound socket: a port picked at bind would be
// unique per address, and with every probe that closes first holding its
// port a minute in TIME_WAIT, a few hundred probes a second would exhaust
// the ephemeral range (TestPortsAreSharedAcrossVIPs). The price: the
// port is known only after connect has sent the SYN into the TUN, so the
// reader parks a SYN it cannot place yet (a copy; at most 256, for a
// second) and the registration takes and sends it, both under the
// registry's lock. The budget left is per destination: the probes of one
// VIP and port (one rule's backends, or several rules' of one VIP and
// check port) share ~28 000 ephemeral ports per minute of TIME_WAIT, about
// 470 probes per second that close first (2 350 backends probed every 5 s),
// as direct probes of one backend address and port would. UDP probe
// sockets are bound to a port at once (no TIME_WAIT) and registered before
// connect, which sends nothing.
//
// # On the host: named, so that a restart finds them
//
//   - Slot i of Slots (16) is a TUN named TUNPrefix+i ("xlbprobe0"), mark
//     and routing table MarkBase+i (0x786c6200+i), and one policy rule per
//     family with that mark at RulePriority. Open takes the first slot
//     whose TUN it can create exclusively (IFF_TUN_EXCL): the TUN is the
//     slot's lock, held while the process lives, so a daemon and its
//     successor during a hand-over, or two appliances' daemons on one host,
//     get slots of their own and never route into each other's TUN.
//   - The TUN is not persistent: when its process ends, crash included,
//     the kernel removes it and the routes through it. A crash leaves the
//     slot's policy rules, pointing at an empty table (they change no
//     route); the next Open on the host replaces them, or removes them
//     when it takes another slot: it removes the rules of every slot whose
//     TUN is gone. Close removes the rules and the TUN. Open and Close hold
//     an exclusive flock on /dev/net/tun (one inode for every namespace)
//     meanwhile, so that a slot's TUN and rules come and go together as
//     another daemon sees them.
//   - The TUN's MTU is the interface's minus MaxOverhead (48, GUE over
//     IPv6; at least 576), so that the kernel sizes probe packets (TCP MSS,
//     UDP) to fit every encapsulation of an interface-sized path. It has no
//     address; IPv6 address generation is off on it (no router
//     solicitations, no MLD). Below 1280 (an interface MTU under 1328)
//     the kernel keeps IPv6 off on it: IPv6 VIPs are then not probed, and
//     their probes fail saying why.
//   - Probe packets leave through an AF_PACKET socket bound to the
//     interface (protocol 0: it never receives), whole frames built by the
//     template, through the interface's queueing discipline as the
//     kernel's own traffic. The workers' rings are not touched: the path
//     costs the packet path nothing, not even a branch.
//
// # Decisions where the design is silent
//
//   - A probe's source is the appliance's address the template uses as
//     the outer source when it is of the VIP's family, else the interface's
//     first global address of that family (an IPv4 VIP over IPv6
//     backends). The backend answers it; its route back must reach the
//     appliance (as the route of the backend's decapsulated traffic back to
//     the outer source would).
//   - The answer comes from the VIP: the appliance's reverse-path filter
//     must accept the VIP as a source on the interface. Its route towards
//     the VIP (the default route, normally) does; with strict rp_filter and
//     no such route the kernel drops the answers and the probes time out.
//   - The flow hash of a probe packet is hash.SelectionHash under
//     AffinityNone with the fleet's seed: what a worker uses for a tracked
//     flow, so a probe's GUE source port and IPv6 flow label spread like a
//     client flow's, and one probe connection keeps one.
//   - A registration lives on after its socket closes (the FIN, a
//     TIME_WAIT answer still go to the same backend); the kernel gives the
//     port to another socket only once the old one is gone, and that
//     socket's registration replaces it. Registrations closed more than two
//     minutes ago are swept every 1024 dials.
//   - A packet out of the TUN that is no registered probe's (not TCP or UDP,
//     an unknown port) is dropped and counted (Stats.Unmatched).
//   - A probe packet that does not fit its backend's template (a path MTU
//     below the interface's) is not sent, neither fragmented nor answered
//     with an ICMP error to the probe's socket: it is counted and noted, and
//     the probe's error then says "a N-byte probe packet does not fit the
//     IPIP path to B (MTU M leaves K bytes inside)". Probes send small
//     packets (a SYN, a request line, a TLS client hello, at most 1024
//     bytes of request), so this names a misconfigured path, not a
//     large-packet problem.
//   - A probe's error carries what the path knows (PathError): the note of
//     the last refused packet, or on a timeout "no answer to N packet(s)
//     sent to VIP:port inside KIND to B", or on an ICMP unreachable (an
//     IPv6 backend without the VIP says so) that one came back. A refused
//     connection (RST, port unreachable) carries nothing: the path worked.
//   - Dial fails at once, without a packet, when Routes has no template for
//     the target: "no route to backend B: no next hop: …".
//
// What it costs (probes per second and CPU against direct probes, measured
// in one run) is in bench/README.md; BenchmarkProbes measures it.
package probepath
