package spsc

import (
	"fmt"
	"math/bits"
	"sync/atomic"
)

// pad keeps each side's hot fields on its own cache line.
type pad [64]byte

// Ring is a bounded single-producer, single-consumer queue of T. See the
// package documentation for who may call what.
type Ring[T any] struct {
	buf  []T
	mask uint64
	_    pad

	// Producer side.
	tail     atomic.Uint64 // next slot to write; published after the write
	headSeen uint64        // the consumer's head as the producer last loaded it
	full     atomic.Uint64 // pushes refused
	_        pad

	// Consumer side.
	head     atomic.Uint64 // next slot to read; published after the read
	tailSeen uint64        // the producer's tail as the consumer last loaded it (Pop batches, so it loads it every call)
	_        pad
}

// New returns a Ring with room for at least size elements (rounded up to a
// power of two; size must be in [1, 2^30]).
func New[T any](size int) (*Ring[T], error) {
	if size < 1 || size > 1<<30 {
		return nil, fmt.Errorf("new spsc ring: size %d out of range [1, 2^30]", size)
	}
	n := 1 << bits.Len(uint(size-1))
	return &Ring[T]{buf: make([]T, n), mask: uint64(n - 1)}, nil
}

// Cap returns the number of elements the ring holds when full.
func (r *Ring[T]) Cap() int { return len(r.buf) }

// Push copies *v into the ring and reports whether there was room; a
// refusal is counted (Full). Producer only.
func (r *Ring[T]) Push(v *T) bool {
	t := r.tail.Load() // our own index: no other writer
	if t-r.headSeen == uint64(len(r.buf)) {
		r.headSeen = r.head.Load()
		if t-r.headSeen == uint64(len(r.buf)) {
			r.full.Add(1)
			return false
		}
	}
	r.buf[t&r.mask] = *v
	r.tail.Store(t + 1) // release: the element is written before it is visible
	return true
}

// Free returns how many Pushes would succeed now, as far as the producer
// can tell (the consumer may have made more room since). Producer only.
func (r *Ring[T]) Free() int {
	t := r.tail.Load()
	r.headSeen = r.head.Load()
	return len(r.buf) - int(t-r.headSeen)
}

// Pop moves up to len(dst) elements into dst, oldest first, and returns
// how many. Consumer only.
func (r *Ring[T]) Pop(dst []T) int {
	h := r.head.Load()
	r.tailSeen = r.tail.Load() // acquire: the elements before it are written
	n := min(uint64(len(dst)), r.tailSeen-h)
	for i := range n {
		dst[i] = r.buf[(h+i)&r.mask]
	}
	if n > 0 {
		r.head.Store(h + n)
	}
	return int(n)
}

// Len returns how many elements wait in the ring. Consumer only.
func (r *Ring[T]) Len() int {
	r.tailSeen = r.tail.Load()
	return int(r.tailSeen - r.head.Load())
}

// Full returns how many Pushes found the ring full. Any goroutine.
func (r *Ring[T]) Full() uint64 { return r.full.Load() }
