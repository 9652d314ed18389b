package prefetch

import (
	"sync/atomic"
	"unsafe"
)

// Sink keeps the loads of Touch: a load whose result nobody uses would be
// removed by the compiler. Keep a Sink in a heap object that outlives the
// loop (a worker's field), whose stores the compiler cannot drop, or call
// Flush. The zero Sink is ready to use; it belongs to one goroutine.
type Sink struct{ acc uint32 }

// Touch loads the byte at p (which must be valid) and folds it into s.
// It is small enough to be inlined: no call per line.
func (s *Sink) Touch(p unsafe.Pointer) { s.acc += uint32(*(*uint8)(p)) }

// sunk receives flushed Sinks.
var sunk atomic.Uint32

// Flush keeps the folded bytes (once per batch, not per load).
func (s *Sink) Flush() { sunk.Store(s.acc) }
