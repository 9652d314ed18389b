//go:build !amd64 && !arm64

package prefetch

import "unsafe"

// Line does nothing where there is no stub for the architecture's
// prefetch instruction: a prefetch is a hint, and a load in its place
// would need p to be valid, which Line does not require.
func Line(p unsafe.Pointer) {}
