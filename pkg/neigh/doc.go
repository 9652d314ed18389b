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
package neigh
