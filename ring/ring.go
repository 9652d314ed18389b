package ring

import "sync/atomic"

// The four rings share one discipline, the kernel's (net/xdp/xsk_queue.h,
// the comment above struct xdp_ring and xskq_cons_*/xskq_prod_*):
//
//	producer                        consumer
//	if (LOAD ->consumer) {   (A)    LOAD.acq ->producer   (C)
//	    STORE $data                 LOAD $data
//	    STORE.rel ->producer (B)    STORE.rel ->consumer  (D)
//	}
//
// (A) pairs with (D) and (B) pairs with (C). Go's sync/atomic loads and
// stores are sequentially consistent, which is at least acquire/release,
// so an atomic Load at (A)/(C) and an atomic Store at (B)/(D) give the
// kernel exactly the ordering it relies on; plain loads and stores (as in
// asavie/xdp) do not (the compiler may reorder or cache them).
//
// Each side keeps cached copies of both indices, like libxdp's xsk.h and
// gVisor's pkg/xdp: the shared index of the other side is loaded only when
// the cached view cannot satisfy a request, and our own index is stored
// once per batch. Indices are free-running uint32s; a slot is index&mask,
// and differences are taken modulo 2^32, so wraparound needs no special
// case.

// consRing is our side of a ring the kernel produces into (RX, completion).
type consRing struct {
	producer *atomic.Uint32 // written by the kernel, read by us at (C)
	consumer *atomic.Uint32 // written by us at (D)
	flags    *atomic.Uint32 // written by the kernel
	mask     uint32

	cachedProd uint32 // last producer value loaded at (C)
	cachedCons uint32 // our consumer position; published by release at (D)
}

// avail returns how many entries, at most max, are ready to consume. It
// loads the kernel's producer index only when the cached one shows fewer
// than max.
func (r *consRing) avail(max uint32) uint32 {
	n := r.cachedProd - r.cachedCons
	if n < max {
		// (C): load-acquire of the producer index before any descriptor
		// load, so we never read a slot the kernel has not finished.
		r.cachedProd = r.producer.Load()
		n = r.cachedProd - r.cachedCons
	}
	if n > max {
		n = max
	}
	return n
}

// release gives n consumed slots back to the kernel.
func (r *consRing) release(n uint32) {
	if n > r.cachedProd-r.cachedCons {
		panic("ring: Release of more entries than Peek returned")
	}
	if n == 0 {
		return // no store: the line stays shared with the kernel's copy
	}
	r.cachedCons += n
	// (D): store-release of the consumer index after our descriptor loads,
	// so the kernel cannot overwrite a slot we are still reading.
	r.consumer.Store(r.cachedCons)
}

func (r *consRing) needWakeup() bool { return r.flags.Load()&needWakeupFlag != 0 }

// prodRing is our side of a ring the kernel consumes from (TX, fill).
type prodRing struct {
	producer *atomic.Uint32 // written by us at (B)
	consumer *atomic.Uint32 // written by the kernel, read by us at (A)
	flags    *atomic.Uint32 // written by the kernel
	mask     uint32
	size     uint32

	cachedProd uint32 // our producer position; published at (B)
	cachedCons uint32 // kernel consumer + size: free = cachedCons - cachedProd
}

// free returns how many slots, at most max, can be written now. It loads
// the kernel's consumer index only when the cached view shows fewer than max.
func (r *prodRing) free(max uint32) uint32 {
	n := r.cachedCons - r.cachedProd
	if n < max {
		// (A): load of the consumer index; our descriptor stores depend on
		// its value (control dependency), so they cannot move before it.
		r.cachedCons = r.consumer.Load() + r.size
		n = r.cachedCons - r.cachedProd
	}
	if n > max {
		n = max
	}
	return n
}

// publish makes n written slots visible to the kernel.
func (r *prodRing) publish(n uint32) {
	if n == 0 {
		return // no store: the line stays shared with the kernel's copy
	}
	r.cachedProd += n
	// (B): store-release of the producer index after our descriptor stores,
	// so the kernel never reads a slot before we finished writing it.
	r.producer.Store(r.cachedProd)
}

func (r *prodRing) needWakeup() bool { return r.flags.Load()&needWakeupFlag != 0 }

// pending reports whether the kernel has not yet consumed everything we
// published.
func (r *prodRing) pending() bool { return r.consumer.Load() != r.cachedProd }

// RXRing holds descriptors of received packets, produced by the kernel.
// Only the socket's owner goroutine may call its methods.
type RXRing struct {
	consRing
	descs []Desc // len = ring size, shared with the kernel
}

// Peek copies up to len(descs) received descriptors, oldest first, into the
// caller's slice and returns how many it copied. It does not consume them:
// a second Peek returns the same descriptors until Release. The frames they
// describe belong to the kernel until Release; after Release(n) the first n
// frames belong to the caller, who must pass each one on exactly once (to
// TX, to the fill ring or back to the [Frames] allocator).
func (r *RXRing) Peek(descs []Desc) int {
	n := r.avail(uint32(len(descs)))
	idx := r.cachedCons
	for i := range descs[:n] {
		descs[i] = r.descs[idx&r.mask]
		idx++
	}
	return int(n)
}

// Release consumes the first n descriptors of the last Peek and hands their
// slots back to the kernel. n must not exceed what Peek returned.
func (r *RXRing) Release(n int) { r.release(uint32(n)) }

// Size is the number of slots in the ring.
func (r *RXRing) Size() int { return len(r.descs) }

// CompletionRing holds the UMEM addresses of frames the kernel has finished
// transmitting, produced by the kernel.
type CompletionRing struct {
	consRing
	addrs []uint64 // len = ring size, shared with the kernel
}

// Peek copies up to len(addrs) completed frame addresses into the caller's
// slice and returns how many. The addresses are those of the TX
// descriptors, so they may point past the start of a chunk (use
// [UMEM.ChunkStart]). After Release(n) the first n frames belong to the
// caller again.
func (r *CompletionRing) Peek(addrs []uint64) int {
	n := r.avail(uint32(len(addrs)))
	idx := r.cachedCons
	for i := range addrs[:n] {
		addrs[i] = r.addrs[idx&r.mask]
		idx++
	}
	return int(n)
}

// Release consumes the first n addresses of the last Peek.
func (r *CompletionRing) Release(n int) { r.release(uint32(n)) }

// Size is the number of slots in the ring.
func (r *CompletionRing) Size() int { return len(r.addrs) }

// TXRing holds descriptors of packets to send, consumed by the kernel.
type TXRing struct {
	prodRing
	descs []Desc
}

// Reserve returns how many descriptors, at most n, Submit would accept now.
// It never blocks and makes no syscall.
func (r *TXRing) Reserve(n int) int { return int(r.free(uint32(n))) }

// Submit writes as many of descs as there are free slots (see Reserve) to
// the ring, publishes them with one index store and returns how many it
// took. The frames of the submitted descriptors belong to the kernel until
// their addresses come back on the completion ring; the caller keeps the
// rest. Submit makes no syscall: call [Rings.KickTX] after it, which
// enters the kernel only when the kernel asked for a wake-up.
func (r *TXRing) Submit(descs []Desc) int {
	n := r.free(uint32(len(descs)))
	idx := r.cachedProd
	for _, d := range descs[:n] {
		r.descs[idx&r.mask] = d
		idx++
	}
	r.publish(n)
	return int(n)
}

// NeedWakeup reports whether the kernel asked to be woken (sendto) before
// it will process the TX ring.
func (r *TXRing) NeedWakeup() bool { return r.needWakeup() }

// Size is the number of slots in the ring.
func (r *TXRing) Size() int { return len(r.descs) }

// FillRing holds addresses of empty frames the kernel may receive into.
type FillRing struct {
	prodRing
	addrs []uint64
}

// Reserve returns how many addresses, at most n, Submit would accept now.
func (r *FillRing) Reserve(n int) int { return int(r.free(uint32(n))) }

// Submit gives as many of addrs as there are free slots to the kernel and
// returns how many it took. Those frames belong to the kernel until they
// come back on RX; the caller keeps the rest.
func (r *FillRing) Submit(addrs []uint64) int {
	n := r.free(uint32(len(addrs)))
	idx := r.cachedProd
	for _, a := range addrs[:n] {
		r.addrs[idx&r.mask] = a
		idx++
	}
	r.publish(n)
	return int(n)
}

// NeedWakeup reports whether the kernel asked to be woken (recvfrom or
// poll) before it will take frames from the fill ring.
func (r *FillRing) NeedWakeup() bool { return r.needWakeup() }

// Size is the number of slots in the ring.
func (r *FillRing) Size() int { return len(r.addrs) }
