package ring

// Desc is one RX or TX descriptor. Its layout is the kernel's struct
// xdp_desc (include/uapi/linux/if_xdp.h): the RX and TX rings are arrays
// of it, shared with the kernel, so the field order and sizes are fixed
// (checked at compile time in ring_unsafe.go).
type Desc struct {
	// Addr is the offset in the UMEM of the first byte of the packet. For
	// a received packet it lies Headroom bytes or more past the start of its
	// chunk; see [UMEM.Headroom].
	Addr uint64
	// Len is the packet length in bytes.
	Len uint32
	// Options carries XDP_PKT_CONTD for multi-buffer packets (never set here:
	// xlb binds without XDP_USE_SG, so every packet is one descriptor).
	Options uint32
}

// XDPPacketHeadroom is the kernel's XDP_PACKET_HEADROOM: in both copy and
// zero-copy mode the kernel puts a received packet this many bytes (plus
// the UMEM headroom registered at bind) after the start of the chunk the
// fill ring gave it (net/xdp/xsk_buff_pool.c xp_alloc, xsk_buff_pool.h
// xp_get_handle). The bytes in front of the packet belong to user space
// once the descriptor is released from RX, so encapsulation can prepend its
// outer headers in place.
const XDPPacketHeadroom = 256

// needWakeupFlag is XDP_RING_NEED_WAKEUP in a ring's flags word.
const needWakeupFlag = 1 << 0
