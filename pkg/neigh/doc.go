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
// context ends: after 1 ms, then twice as long each time up to every
// 20 ms (ARP on a link answers in well under a millisecond, and every
// backend behind the neighbour waits for it). No packet is sent by xlb
// itself, so this works in any network namespace: New(ns) opens its
// sockets there, New(nil) in the caller's.
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
// Route lookups (route.go) are the pass's bulk, one per backend. They run
// in parallel on the caller's goroutines: the pass owns as many route
// sockets as its caller runs lookups at once (the daemon: one per CPU of
// the control plane, at most 8), opened when first needed, and a lookup
// takes one that no other lookup holds. One socket shared by all
// serialised them on its lock, and since the kernel answers RTM_GETROUTE
// within the sender's system call, a single socket kept one CPU busy.
// The request and its answer are our own, not the netlink library's
// RouteGet: a reused buffer and only the fields a next hop uses (RTA_OIF,
// RTA_GATEWAY or RTA_VIA, RTA_PREFSRC, RTAX_MTU), for less time and a
// tenth of the allocation (bench/README.md §6); route_test.go holds it to
// the library's answers. RTA_VIA, which the library leaves out of a
// route's gateway, is the gateway of an IPv4 route via an IPv6 router:
// the neighbour to resolve is that router. The few interface and
// neighbour requests of a pass stay on one library handle.
package neigh
