package ring

// Frames is a LIFO allocator of UMEM chunks. The most recently freed chunk
// is handed out first, so a frame that just came back from the completion
// ring is refilled while its cache lines are still warm. It is a plain
// stack of chunk addresses: no locks, owned by the socket's goroutine.
type Frames struct {
	free      []uint64 // stack; free[len-1] is the next to hand out
	chunkMask uint64   // ^(frameSize-1): maps any address in a chunk to its start
	numFrames int
}

// newFrames returns an allocator holding every chunk of a UMEM with
// numFrames chunks of frameSize bytes (a power of two).
func newFrames(numFrames, frameSize int) Frames {
	f := Frames{
		free:      make([]uint64, numFrames),
		chunkMask: ^uint64(frameSize - 1),
		numFrames: numFrames,
	}
	// Push the high addresses first so the first allocations are chunk 0, 1, …
	for i := range f.free {
		f.free[i] = uint64(numFrames-1-i) * uint64(frameSize)
	}
	return f
}

// Len returns how many chunks are free.
func (f *Frames) Len() int { return len(f.free) }

// Cap returns how many chunks the UMEM has.
func (f *Frames) Cap() int { return f.numFrames }

// Alloc fills dst with up to len(dst) free chunk addresses and returns how
// many. The chunks belong to the caller until it passes them on.
func (f *Frames) Alloc(dst []uint64) int {
	n := min(len(dst), len(f.free))
	top := len(f.free)
	for i := range dst[:n] {
		top--
		dst[i] = f.free[top]
	}
	f.free = f.free[:top]
	return n
}

// Free returns chunks to the allocator. Any address inside a chunk may be
// given (a TX or RX address that points past the chunk start); it is
// rounded down to the chunk. Freeing a chunk twice, or a chunk the caller
// does not own, corrupts the UMEM's bookkeeping: it panics when the stack
// would overflow (the only double free it can detect cheaply) and on an
// address outside the UMEM.
func (f *Frames) Free(addrs []uint64) {
	if len(f.free)+len(addrs) > f.numFrames {
		panic("ring: Frames.Free of more chunks than the UMEM has (double free)")
	}
	end := uint64(f.numFrames) * (^f.chunkMask + 1)
	for _, a := range addrs {
		if a >= end {
			panic("ring: Frames.Free of an address outside the UMEM")
		}
		f.free = append(f.free, a&f.chunkMask)
	}
}

// FreeDescs returns the chunks of whole descriptors to the allocator, as
// Free does for addresses: for a caller that drops a batch as it came
// (tests, tools). The worker's drop path is Free: it collects the
// addresses of dropped frames (and spare fragment chunks) in its own
// array while it decides the batch.
func (f *Frames) FreeDescs(descs []Desc) {
	if len(f.free)+len(descs) > f.numFrames {
		panic("ring: Frames.FreeDescs of more chunks than the UMEM has (double free)")
	}
	end := uint64(f.numFrames) * (^f.chunkMask + 1)
	for _, d := range descs {
		if d.Addr >= end {
			panic("ring: Frames.FreeDescs of an address outside the UMEM")
		}
		f.free = append(f.free, d.Addr&f.chunkMask)
	}
}
