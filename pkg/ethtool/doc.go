// Package ethtool asks a network interface's driver through the ethtool
// ioctl (SIOCETHTOOL) — the calls xlb needs, without the ethtool(8)
// binary: the channel counts (how many receive queues are active, not
// merely allocated) and the legacy offload switches the lab turns off.
//
// Every call works on the interface in the calling thread's network
// namespace (run it inside netns.NS.Do for another one) and needs
// CAP_NET_ADMIN only for the set calls. Nothing here is on the packet
// path. unsafe is confined to ethtool_unsafe.go: the ioctl passes a
// pointer to a kernel struct inside struct ifreq.
package ethtool
