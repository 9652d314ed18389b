// Package ring is xlb's AF_XDP socket: one UMEM, the four rings shared with
// the kernel, a LIFO frame allocator, and an in-memory Fake that plays the
// kernel for tests without root. The XDP program that feeds the sockets is
// in ring/xsk.
//
// # The four rings
//
//	             user space (the queue's worker)        kernel
//	Frames ──Refill──▶ FILL ring ───────────────────▶ NIC/veth writes packet
//	(LIFO)                                                  │
//	   ▲                RX ring  ◀──────────────────────────┘
//	   │                  │ Peek → process in place → Release
//	   │                  ▼
//	   │   drop: Frames.Free     forward: TX.Submit ──▶ TX ring ──▶ wire
//	   │                                                    │
//	   └──Reclaim── COMPLETION ring ◀───────────────────────┘
//
// Fill and TX are produced by us and consumed by the kernel; RX and
// completion the other way round. Fill and completion carry UMEM
// addresses (uint64); RX and TX carry [Desc] (struct xdp_desc).
//
// # Ownership: one goroutine, and who holds each frame
//
// A [Socket] (or [Fake]) and everything reachable from [Queue.Rings] —
// rings, UMEM, [Frames] — belong to exactly one goroutine, the queue's
// dataplane worker, as gVisor's pkg/xdp ControlBlock does. Nothing on the
// packet path locks; sharing a socket between goroutines is a data race.
// Only Socket.Stats and FD may be called from elsewhere.
//
// Every UMEM chunk is, at any moment, in exactly one of these hands:
//
//	Frames (free)      → Refill puts it on the fill ring (kernel's)
//	kernel, fill/RX    → after RX.Peek+Release: the caller's
//	the caller         → TX.Submit (kernel's until completion), or
//	                     Frames.Free (drop; FreeDescs for whole
//	                     descriptors), or Fill.Submit (reuse)
//	kernel, TX         → after Completion.Peek+Release (Reclaim): Frames
//
// "Valid until" on a method means: slices from [UMEM.Frame] and
// [UMEM.Chunk] may be read and written only while the caller holds the
// frame (between RX Release and handing it on). Peek copies descriptors
// into a caller-owned slice (wireguard-go's batch style), so a descriptor
// stays meaningful after Release; it is the frame it names that changes
// hands. A Peek without Release can be repeated and returns the same
// entries. Releasing more than Peek returned panics (a bug, not input).
// Freeing more chunks than the UMEM has panics (a double free).
//
// # Ordering (net/xdp/xsk_queue.h)
//
// The kernel documents the ring protocol above struct xdp_ring: the
// producer checks the consumer index (A), writes the slots, then
// store-releases the producer index (B); the consumer load-acquires the
// producer index (C), reads the slots, then store-releases the consumer
// index (D); (A) pairs with (D), (B) with (C). Each of those points is an
// atomic Load or Store of sync/atomic in ring.go, commented with its
// letter. Go's atomics are sequentially consistent, which is at least
// what the kernel needs; asavie/xdp's plain loads and stores (its fences
// are commented out) are not. Each side keeps cached copies of both
// indices (libxdp xsk.h, gVisor pkg/xdp): the other side's index is loaded
// only when the cache cannot satisfy a request, our own index is stored
// once per batch and not at all for an empty batch. Indices are free-
// running uint32s masked into power-of-two rings; wraparound of the 32-bit
// counters is tested by starting the Fake's indices just below 2^32.
//
// # Wake-ups (XDP_USE_NEED_WAKEUP)
//
// Sockets are bound with XDP_USE_NEED_WAKEUP. [Rings.KickTX] enters the
// kernel (sendto, MSG_DONTWAIT) only when the TX ring's flags carry
// XDP_RING_NEED_WAKEUP and entries are still unconsumed; [Rings.KickRX]
// (recvfrom) only when the fill ring asks. Zero-copy drivers clear the
// flags while their NAPI loop is running, so a busy worker makes no
// syscalls. In copy mode the kernel sets the TX flag for good and sends at
// most 32 descriptors per sendto (TX_BATCH_SIZE in net/xdp/xsk.c), so the
// worker calls KickTX once per loop while TX is not drained; EAGAIN and
// EBUSY are expected there and not reported. Kick errors are bare
// syscall.Errno values: no allocation on the packet path. [Rings.Settled]
// says when an idle owner owes the kernel nothing (TX all taken, a batch
// of chunks on the fill ring): it may then sleep longer in [Socket.Poll],
// which the first packet ends.
//
// # Headroom
//
// The kernel writes a received packet XDP_PACKET_HEADROOM (256) bytes plus
// the UMEM's registered headroom ([Options.ExtraHeadroom], default 0)
// after the start of the chunk the fill ring gave it, in copy and
// zero-copy mode alike (xsk_buff_pool.c xp_alloc / xp_get_handle). Those
// bytes are ours once the descriptor is released. [UMEM.Headroom] returns
// the guaranteed amount (256 by default): encapsulation prepends its outer
// headers (at most ~100 bytes: Ethernet + IPv6 + UDP + GUE, or GRE) in
// place by moving Desc.Addr back and growing Desc.Len, then submits the
// descriptor to TX; the kernel accepts any TX address inside a chunk.
// Chunks are 4096 bytes by default so a 1500-byte packet, the headroom and
// the encapsulation fit in one aligned chunk.
//
// # Zero-copy and copy mode
//
// [BindAuto] binds with XDP_ZEROCOPY first and, if the driver refuses
// (veth: EOPNOTSUPP), binds the same socket again with XDP_COPY; the
// kernel leaves a socket unbound after a failed bind, so nothing is
// rebuilt. [Socket.ZeroCopy] reports what the kernel granted
// (XDP_OPTIONS). [BindZeroCopy] and [BindCopy] insist on one mode. Open
// puts a full fill ring of chunks in place before returning.
//
// # Hand-over to another process
//
// A queue's socket can be handed to a successor process while it runs
// (xlb restart and upgrade, docs/design.md#restarts-and-hand-over; the
// protocol is pkg/handover's). The UMEM
// is a memfd ("xlb-umem-q<N>", sealed against shrinking and growing)
// mapped MAP_SHARED|MAP_POPULATE: XDP_UMEM_REG pins the pages of the
// mapping it is given and descriptors are offsets into them, so a
// successor sees the same frames only through the same shared pages. The
// successor receives the socket fd and the memfd and calls [Adopt], which
// maps the UMEM and the four rings again (Linux 6.4 and later; before, the
// kernel answers EBUSY and Adopt returns [ErrRemapUnsupported]) without
// touching any index, so the previous owner keeps forwarding meanwhile.
// At the cut-over the previous owner stops at a batch boundary, where it
// holds no chunk: every chunk is in its allocator or on a ring. It hands
// over [Frames.FreeList]; the successor's [Socket.TakeOver] reads the
// shared indices into its caches and takes the list as its allocator,
// after checking that no listed chunk is on a ring and none is listed
// twice. Packets that arrive in between wait on the RX ring (2048 slots:
// 100 ms at 20 kpps per queue). The previous owner then closes its copies;
// the kernel releases a socket, and empties its XSKMAP slot, only with its
// last file reference, so nothing is detached. [Fake.Adopt] is the same
// over the Fake, for tests at random batch boundaries
// (TestAdoptAtRandomBatchBoundaries); TestAdoptBoundSocket does it on a
// real socket with packets in flight.
//
// A free list exists only at a batch boundary of a live owner: after a
// crash, or when a successor dies after the cut-over, which chunks the
// dead owner held is unknown (the kernel moves chunks between rings
// concurrently, so recounting from the rings could hand a chunk out
// twice). Those paths open a new socket instead.
//
// # Decisions where the design is silent
//
//   - The UMEM uses ordinary shmem pages, not MFD_HUGETLB: huge pages need
//     a reserved pool the appliance would have to size at boot.
//   - The rings are concrete types reached through [Rings]; the [Queue]
//     interface (Socket, Fake) is used once per worker, so the per-packet
//     path has no interface call.
//   - Fill and completion are reached through Refill/Reclaim helpers with
//     an internal scratch slice sized to the ring, so a worker needs no
//     buffers of its own for them.
//   - Frames.Free accepts any address inside a chunk (TX and completion
//     addresses usually point past the chunk start) and rounds it down.
//   - An invalid TX descriptor is skipped by the kernel and never
//     completes; the Fake does the same and counts TXInvalidDescs, so a
//     leak of that kind shows up in tests.
//   - Multi-buffer (XDP_USE_SG) is not used: one packet, one descriptor.
//
// # Why xlb's own ring, not asavie/xdp's
//
// github.com/asavie/xdp is the AF_XDP library the ring was measured
// against (ring/veth_bench_test.go; the figures are in bench/README.md).
// On veth, copy mode, the CPU per packet is the kernel's: each sendto runs
// the whole TX path (skb allocation, copy, veth transmit) on the worker's
// thread, and the two libraries' ring code is lost in it, within each
// other's spread. We keep xlb's ring: it is not measurably slower; it
// orders its index accesses with atomics where asavie/xdp uses plain loads
// and stores (right only while the compiler does not reorder or cache
// them, and only on x86's strong ordering); it makes no syscall unless the
// kernel asks (on zero-copy NICs a busy worker makes none, where asavie
// calls sendto on every Transmit); it exposes the headroom encapsulation
// needs, reuses frames LIFO instead of scanning a free list, can be tested
// without root through the Fake, and releases its socket on Close
// (asavie's Close unmaps the UMEM but not the ring mappings, which keep
// the socket alive and its queue bound until the process exits).
// asavie/xdp is used only by that benchmark. Its Program (attach/detach,
// XSKMAP registration) builds a fixed redirect-everything program, so
// ring/xsk does that part itself.
//
// Reproduce (as root; the veth benchmark builds and removes its own
// namespaces):
//
//	go test -run '^$' -bench 'Ring$|VethForward' -benchtime=1s -count=8 ./ring/
package ring
