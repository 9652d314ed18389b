package ring

// Queue is one AF_XDP queue: a real [Socket] or the in-memory [Fake]. The
// dataplane worker takes the *Rings once and drives it directly, so the
// per-packet path has no interface call.
type Queue interface {
	// Rings returns the queue's rings, UMEM and frame allocator. The
	// pointer stays valid until Close.
	Rings() *Rings
	// FD returns the socket's file descriptor for XSKMAP registration, or
	// -1 for a Fake.
	FD() int
	// Stats returns the kernel's counters for the socket.
	Stats() (Stats, error)
	// Close releases the socket. Frames and slices into the UMEM must not
	// be used afterwards.
	Close() error
}

var _ Queue = (*Fake)(nil)

// waker enters the kernel on behalf of a ring that asked for it.
type waker interface {
	wakeTX() error
	wakeRX() error
}

// Rings is everything the owner goroutine of one queue touches on the
// packet path. None of it is safe for concurrent use: exactly one
// goroutine may call its methods (see the package documentation).
type Rings struct {
	RX         RXRing
	TX         TXRing
	Fill       FillRing
	Completion CompletionRing
	// Frames holds the chunks that are in nobody else's hands: not on the
	// fill ring, RX, TX or completion, and not held by the caller.
	Frames Frames
	UMEM   UMEM

	waker   waker
	scratch []uint64 // RingSize addresses for Refill and Reclaim
	// busyPoll: the socket prefers busy polling (Socket.SetBusyPoll), so
	// the owner drives the queue's NAPI with one recvfrom per loop.
	busyPoll bool
}

// Frame returns the packet d describes as a slice into the UMEM; see
// [UMEM.Frame].
func (r *Rings) Frame(d Desc) []byte { return r.UMEM.Frame(d) }

// Refill moves free chunks from the allocator to the fill ring, as many as
// fit, and returns how many. It makes no syscall; call KickRX afterwards.
func (r *Rings) Refill() int {
	n := r.Fill.Reserve(len(r.scratch))
	n = r.Frames.Alloc(r.scratch[:n])
	r.Fill.Submit(r.scratch[:n])
	return n
}

// Reclaim moves every completed TX frame back to the allocator and returns
// how many.
func (r *Rings) Reclaim() int {
	total := 0
	for {
		n := r.Completion.Peek(r.scratch)
		r.Frames.Free(r.scratch[:n])
		r.Completion.Release(n)
		total += n
		if n < len(r.scratch) {
			return total // drained what was there: no second index load
		}
	}
}

// KickTX wakes the kernel to transmit, only if it set XDP_RING_NEED_WAKEUP
// on the TX ring and has not consumed everything submitted; otherwise it
// costs one or two atomic loads. In copy mode the kernel never clears the
// flag and sends at most 32 descriptors per wake-up (net/xdp/xsk.c
// TX_BATCH_SIZE), so call KickTX once per loop while TX is not drained.
// Transient conditions (EAGAIN: more than a batch is queued; EBUSY,
// ENOBUFS, EINTR: the kernel is still busy) are not errors. Any error is a
// bare syscall.Errno, which does not allocate.
func (r *Rings) KickTX() error {
	if !r.TX.NeedWakeup() || !r.TX.pending() {
		return nil
	}
	return r.waker.wakeTX()
}

// KickRX wakes the kernel to take frames from the fill ring, only if it
// set XDP_RING_NEED_WAKEUP on the fill ring. A busy-polling socket is
// woken by BusyPoll instead, once per loop.
func (r *Rings) KickRX() error {
	if r.busyPoll || !r.Fill.NeedWakeup() {
		return nil
	}
	return r.waker.wakeRX()
}

// Settled reports whether the rings need nothing of their owner until a
// packet arrives: the kernel has taken everything submitted to TX (no kick
// is owed; in copy mode it takes 32 descriptors per kick) and the fill
// ring holds at least min chunks to receive into, so the first packet
// makes the socket readable and wakes a poll. Frames the kernel has yet
// to complete are taken back at the next loop. An idle owner that is
// settled may sleep longer between loops.
func (r *Rings) Settled(min int) bool {
	return !r.TX.pending() && r.Fill.cachedProd-r.Fill.consumer.Load() >= uint32(min)
}

// BusyPoll runs the queue's NAPI poll on the caller's thread (recvfrom,
// MSG_DONTWAIT: net/xdp/xsk.c busy-loops once with the socket's budget)
// when the socket prefers busy polling, and does nothing otherwise. The
// owner calls it once per loop, before it reads RX: with preferred busy
// polling the kernel leaves the queue's receive work to it.
func (r *Rings) BusyPoll() error {
	if !r.busyPoll {
		return nil
	}
	return r.waker.wakeRX()
}

// init sets the ring state once the shared memory is in place: cached
// indices from the shared ones, masks, the allocator and the UMEM geometry.
func (r *Rings) init(o Options) {
	r.Frames = newFrames(o.NumFrames, o.FrameSize)
	r.scratch = make([]uint64, o.RingSize)
	mask := uint32(o.RingSize - 1)
	r.RX.mask, r.Completion.mask = mask, mask
	r.TX.mask, r.Fill.mask = mask, mask
	r.TX.size, r.Fill.size = uint32(o.RingSize), uint32(o.RingSize)
	// A producer may fill every slot until it has seen the kernel consume.
	r.TX.cachedCons = r.TX.consumer.Load() + r.TX.size
	r.Fill.cachedCons = r.Fill.consumer.Load() + r.Fill.size
	r.TX.cachedProd = r.TX.producer.Load()
	r.Fill.cachedProd = r.Fill.producer.Load()
	r.RX.cachedCons = r.RX.consumer.Load()
	r.RX.cachedProd = r.RX.producer.Load()
	r.Completion.cachedCons = r.Completion.consumer.Load()
	r.Completion.cachedProd = r.Completion.producer.Load()
	r.UMEM.frameSize = uint64(o.FrameSize)
	r.UMEM.chunkMask = ^uint64(o.FrameSize - 1)
	r.UMEM.headroom = XDPPacketHeadroom + o.ExtraHeadroom
}
