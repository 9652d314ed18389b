//go:build prefetchnone

package prefetch

// Of, built with -tags prefetchnone, does nothing: the staged worker
// without hints, for measurements.
func Of[T any](p *T) {}
