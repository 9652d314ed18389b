//go:build amd64 || arm64

package prefetch

import "unsafe"

// Line starts loading the cache line that holds *p into every cache
// level (PREFETCHT0 on amd64, PRFM PLDL1KEEP on arm64). p may be stale or
// point anywhere: a prefetch never faults.
//
//go:noescape
func Line(p unsafe.Pointer)
