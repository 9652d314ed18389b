// Package prefetch asks the CPU to start loading cache lines that the
// packet path will read soon, so that a batch's cache misses overlap
// instead of being taken one after the other (DPDK's bulk lookups and
// VPP's vector loops do the same).
//
// Line is a tiny assembly stub, PREFETCHT0 on amd64 and PRFM PLDL1KEEP
// on arm64: a hint that never faults, retires at once and does not hold
// up the instructions after it, for the price of a call (assembly is
// never inlined). On other architectures it does nothing. Sink.Touch is
// the pure-Go alternative: an independent one-byte load folded into a
// sink so the compiler keeps it; it is inlined, but it needs a valid
// pointer, takes a load slot and, while its line is missing, a place in
// the reorder buffer. BenchmarkGather compares the two; pkg/dataplane's
// doc says which one the worker uses and why.
//
// Of(p) is what the packet path calls: Line of the line holding *p. Two
// build tags swap its body for measurements: -tags prefetchload makes it
// the independent load (into a racy sink: measurements only), -tags
// prefetchnone makes it nothing (the staged worker without hints).
//
// Everything here is safe for concurrent use and allocates nothing.
package prefetch
