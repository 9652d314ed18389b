// Package bench holds xlb's measurements: the per-packet micro-benchmarks
// of this package (`go test ./bench -bench .`: parse, decide and
// encapsulate through a dataplane.Worker over a ring.Fake), the pktgen
// sample scripts (bench/pktgen), and the side-by-side harness
// (bench/run → bench/cmd/xlbbench) that measures xlb against a no-op
// AF_XDP reflector and nftables in one run; bench/scale measures the
// control plane of a real `xlb run` at N rules × M backends. See
// bench/README.md for how to run them and what each number means.
package bench
