//go:build prefetchload

package prefetch

import "unsafe"

// ofSunk keeps the loads of Of in this experimental build (racy by
// design: the value is never read).
var ofSunk uint8

// Of, built with -tags prefetchload, is an independent one-byte load of
// *p kept by a sink: the alternative to the stub that BenchmarkPipeline
// and the appliance were measured with (see pkg/dataplane's doc).
func Of[T any](p *T) { ofSunk += *(*uint8)(unsafe.Pointer(p)) }
