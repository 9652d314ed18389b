// Package spsc is a bounded single-producer, single-consumer ring: the
// hand-off from a packet worker to a goroutine off the packet path (the
// fleet sender takes the exceptions each worker's scan finds).
//
// # Ownership
//
// A Ring has one producer goroutine (Push, Free) and one consumer
// goroutine (Pop, Len); any goroutine may read Full. Neither side ever
// waits for the other: Push on a full ring returns false at once and
// counts it, Pop on an empty one returns 0. Each side publishes its index
// with one atomic store and reads the other's with one atomic load, so a
// Push or Pop is two atomic operations and a copy of the element; nothing
// is allocated after New, nothing locks, nothing makes a syscall.
//
// The two indexes live on cache lines of their own, so a producer and a
// consumer on different CPUs do not write one line. The producer keeps a
// private copy of the consumer's index and loads the shared one only when
// its copy says the ring is full, so a Push into a ring that is not full
// reads nothing of the consumer's line; the consumer pops in batches and
// loads the producer's index once per Pop.
//
// # Decisions
//
//   - The capacity is rounded up to a power of two (an index is masked,
//     not divided). Indexes are free-running uint64s: they never wrap in
//     practice (2^64 pushes).
//   - Full counts the pushes refused because the ring was full; what to do
//     about them (retry, drop, slow down) is the producer's decision.
package spsc
