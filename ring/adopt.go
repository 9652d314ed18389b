package ring

import (
	"errors"
	"fmt"
)

// ErrRemapUnsupported says the kernel refused to map the rings of a bound
// socket a second time (Linux before 6.4), so a socket cannot be handed to
// another process; the caller opens a new socket instead.
var ErrRemapUnsupported = errors.New("kernel cannot map the rings of a bound xdp socket again (needs linux 6.4)")

// errFreeList marks a free list that cannot be the allocator of this UMEM.
var errFreeList = errors.New("invalid free list")

// FreeList returns a copy of the chunks the allocator holds, for the
// hand-over of a queue to another owner: taken by the owner goroutine at a
// batch boundary, when every other chunk is on one of the four rings.
func (f *Frames) FreeList() []uint64 {
	out := make([]uint64, len(f.free))
	copy(out, f.free)
	return out
}

// adopt takes over rings whose shared memory (r's ring slices and UMEM)
// another owner has been driving: the cached indices come from the shared
// ones, as init does, and the allocator from free, the previous owner's
// FreeList. free is checked against the geometry and against the live
// part of each ring: a chunk the kernel or a ring holds is never free, and
// a chunk listed twice would be handed out twice.
func (r *Rings) adopt(o Options, free []uint64) error {
	if len(free) > o.NumFrames {
		return fmt.Errorf("%w: %d chunks for a UMEM of %d", errFreeList, len(free), o.NumFrames)
	}
	r.init(o)
	seen := make([]bool, o.NumFrames)
	fs := uint64(o.FrameSize)
	for _, a := range free {
		if a%fs != 0 || a/fs >= uint64(o.NumFrames) {
			return fmt.Errorf("%w: %#x is not a chunk of a %d×%d UMEM", errFreeList, a, o.NumFrames, o.FrameSize)
		}
		if seen[a/fs] {
			return fmt.Errorf("%w: chunk %#x listed twice", errFreeList, a)
		}
		seen[a/fs] = true
	}
	held := func(name string, a uint64) error {
		if c := a / fs; c < uint64(o.NumFrames) && seen[c] {
			return fmt.Errorf("%w: chunk %#x is free and on the %s ring", errFreeList, a&^(fs-1), name)
		}
		return nil
	}
	for i := r.Fill.consumer.Load(); i != r.Fill.cachedProd; i++ {
		if err := held("fill", r.Fill.addrs[i&r.Fill.mask]); err != nil {
			return err
		}
	}
	for i := r.RX.cachedCons; i != r.RX.cachedProd; i++ {
		if err := held("rx", r.RX.descs[i&r.RX.mask].Addr); err != nil {
			return err
		}
	}
	for i := r.TX.consumer.Load(); i != r.TX.cachedProd; i++ {
		if err := held("tx", r.TX.descs[i&r.TX.mask].Addr); err != nil {
			return err
		}
	}
	for i := r.Completion.cachedCons; i != r.Completion.cachedProd; i++ {
		if err := held("completion", r.Completion.addrs[i&r.Completion.mask]); err != nil {
			return err
		}
	}
	r.Frames.free = r.Frames.free[:0]
	r.Frames.free = append(r.Frames.free, free...)
	return nil
}

// Adopt returns a second user side over f's kernel side, as a successor
// process sees a socket handed to it: the same ring memory and UMEM, the
// cached indices read from the shared ones, and free (the previous owner's
// FreeList) as its allocator. From then on the returned Rings are the
// owner's and the previous ones must not be used. f's step functions
// (Deliver, Transmit) keep playing the kernel for both.
func (f *Fake) Adopt(free []uint64) (*Rings, error) {
	o := Options{
		FrameSize: int(f.r.UMEM.frameSize),
		NumFrames: f.r.Frames.Cap(),
		RingSize:  len(f.r.RX.descs),
	}
	o.ExtraHeadroom = f.r.UMEM.headroom - XDPPacketHeadroom
	r := &Rings{
		RX:         RXRing{consRing: consRing{producer: f.r.RX.producer, consumer: f.r.RX.consumer, flags: f.r.RX.flags}, descs: f.r.RX.descs},
		TX:         TXRing{prodRing: prodRing{producer: f.r.TX.producer, consumer: f.r.TX.consumer, flags: f.r.TX.flags}, descs: f.r.TX.descs},
		Fill:       FillRing{prodRing: prodRing{producer: f.r.Fill.producer, consumer: f.r.Fill.consumer, flags: f.r.Fill.flags}, addrs: f.r.Fill.addrs},
		Completion: CompletionRing{consRing: consRing{producer: f.r.Completion.producer, consumer: f.r.Completion.consumer, flags: f.r.Completion.flags}, addrs: f.r.Completion.addrs},
		UMEM:       UMEM{mem: f.r.UMEM.mem},
		waker:      f,
	}
	if err := r.adopt(o, free); err != nil {
		return nil, fmt.Errorf("adopt fake queue: %w", err)
	}
	return r, nil
}
