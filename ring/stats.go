package ring

// Stats are the kernel's counters for one socket (getsockopt
// XDP_STATISTICS, struct xdp_statistics), or the Fake's equivalents. The
// kernel counts a packet dropped for want of a fill-ring frame in both
// RXDropped and RXFillRingEmpty (observed on 6.18, copy mode); the Fake
// counts it in RXFillRingEmpty only.
type Stats struct {
	RXDropped        uint64 // dropped for reasons other than invalid descriptors
	RXInvalidDescs   uint64 // dropped because of invalid descriptors
	TXInvalidDescs   uint64 // TX descriptors the kernel rejected
	RXRingFull       uint64 // dropped because the RX ring was full
	RXFillRingEmpty  uint64 // times the fill ring was empty when a packet arrived
	TXRingEmptyDescs uint64 // times the kernel found the TX ring empty on a wake-up
}
