package prefetch

import "unsafe"

// Of is Line for the line that holds *p, so that callers need no unsafe.
// It is inlined; what remains is the call of the stub.
func Of[T any](p *T) { Line(unsafe.Pointer(p)) }

// TouchOf is s.Touch of the first byte of *p (which must be valid).
func TouchOf[T any](s *Sink, p *T) { s.Touch(unsafe.Pointer(p)) }
