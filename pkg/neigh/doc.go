// Package neigh finds, for each backend, the next hop and the MAC address
// that an encapsulated (or MAC-rewritten) frame must carry, from the
// kernel's route and neighbour tables over netlink.
//
// The appliance is one-armed: frames leave on the interface they came in
// on, so a backend is usable only when its route leaves through that
// interface. For a backend behind a router the MAC is the gateway's; for a
// backend on the link (DIRECT mode needs that) it is the backend's own.
//
// Resolution: when the kernel has no usable neighbour entry, Resolve asks
// it to resolve one by creating the entry with NTF_USE (the kernel treats
// that as a packet waiting for the neighbour and starts ARP or neighbour
// discovery), then polls the table until the entry is usable or the
// context ends. No packet is sent by xlb itself and no socket is needed,
// so this works inside any network namespace reachable by a netlink handle.
//
// A Resolver is safe for concurrent use; it holds no cache. A Pass
// resolves many backends as one (the daemon's periodic refresh of every
// backend): each interface's attributes and each neighbour's MAC are
// looked up once per pass, so the backends behind one router cost one
// route lookup each. MACs are copied out of the netlink messages, so a
// kept next hop keeps 6 bytes, not the message. The control
// plane resolves every backend before the backend may become eligible,
// refreshes periodically, and treats a backend whose MAC is unknown as not
// eligible (counted and logged once by the caller).
//
// Route lookups (route.go) are the pass's bulk: one per backend. They run
// in parallel, on the caller's goroutines: the pass owns a route socket
// per CPU (at most 8, the daemon's resolving goroutines), opened in the
// Resolver's namespace when first needed, and a lookup takes one that no
// other lookup holds (one socket shared by all serialised them on its
// lock, and the kernel answers RTM_GETROUTE within the sender's system
// call, so a single socket used one CPU). The request and its answer are
// our own, not the netlink library's RouteGet: a reused buffer, only the
// fields a next hop uses (RTA_OIF, RTA_GATEWAY or RTA_VIA, RTA_PREFSRC,
// RTAX_MTU): less time and a tenth of the allocation (bench/README.md
// §6), and route_test.go holds it to the library's answers. RTA_VIA, which the
// library leaves out of a route's gateway, is the gateway of an IPv4
// route via an IPv6 router: the neighbour to resolve is that router. The
// few interface and neighbour requests of a pass stay on one library
// handle.
package neigh
