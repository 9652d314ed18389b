//go:build !prefetchload && !prefetchnone

package prefetch

import "unsafe"

// Of is Line for the line that holds *p, so that callers need no unsafe.
// It is inlined; what remains is the call of the stub.
func Of[T any](p *T) { Line(unsafe.Pointer(p)) }
