package ring

import (
	"fmt"
	"sync/atomic"
)

// Fake is an in-memory [Queue] that plays the kernel, for tests without
// root. Its user side is the same [Rings] code a [Socket] runs, over the
// same descriptor layout; its kernel side is a set of explicit step
// functions (Deliver, Transmit) that consume and produce with the kernel's
// ordering rules. The step functions may run on another goroutine than
// the ring's owner (that is how the race detector checks the ordering),
// but only one goroutine at a time may play the kernel.
type Fake struct {
	r                        Rings
	rx, tx, fill, completion fakeIndices

	rxDropped, rxRingFull, rxFillEmpty, txInvalid, txEmpty atomic.Uint64
	kicksTX, kicksRX                                       atomic.Uint64
}

// fakeIndices stands for the shared header of one kernel ring.
type fakeIndices struct {
	producer, consumer, flags atomic.Uint32
	_                         [52]byte // keep rings off each other's cache line
}

// NewFake returns a Fake with the geometry of o (Ifindex, Queue and Bind
// are ignored). Its chunks all start in the allocator, as with Open.
func NewFake(o Options) (*Fake, error) { return NewFakeAt(o, 0) }

// NewFakeAt is NewFake with every ring index starting at start instead of
// 0, to test wraparound of the free-running 32-bit indices.
func NewFakeAt(o Options, start uint32) (*Fake, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("new fake queue: %w", err)
	}
	o = o.withDefaults()
	f := &Fake{}
	for _, ix := range []*fakeIndices{&f.rx, &f.tx, &f.fill, &f.completion} {
		ix.producer.Store(start)
		ix.consumer.Store(start)
	}
	r := &f.r
	r.RX.producer, r.RX.consumer, r.RX.flags = &f.rx.producer, &f.rx.consumer, &f.rx.flags
	r.TX.producer, r.TX.consumer, r.TX.flags = &f.tx.producer, &f.tx.consumer, &f.tx.flags
	r.Fill.producer, r.Fill.consumer, r.Fill.flags = &f.fill.producer, &f.fill.consumer, &f.fill.flags
	r.Completion.producer, r.Completion.consumer, r.Completion.flags = &f.completion.producer, &f.completion.consumer, &f.completion.flags
	r.RX.descs = make([]Desc, o.RingSize)
	r.TX.descs = make([]Desc, o.RingSize)
	r.Fill.addrs = make([]uint64, o.RingSize)
	r.Completion.addrs = make([]uint64, o.RingSize)
	r.UMEM.mem = make([]byte, o.NumFrames*o.FrameSize)
	r.waker = f
	r.init(o)
	return f, nil
}

// Rings returns the user side.
func (f *Fake) Rings() *Rings { return &f.r }

// FD returns -1: a Fake has no socket.
func (f *Fake) FD() int { return -1 }

// Close does nothing; it exists to satisfy Queue.
func (f *Fake) Close() error { return nil }

// Stats returns the Fake's counters, with the kernel's meanings.
func (f *Fake) Stats() (Stats, error) {
	return Stats{
		RXDropped:        f.rxDropped.Load(),
		TXInvalidDescs:   f.txInvalid.Load(),
		RXRingFull:       f.rxRingFull.Load(),
		RXFillRingEmpty:  f.rxFillEmpty.Load(),
		TXRingEmptyDescs: f.txEmpty.Load(),
	}, nil
}

// SetNeedWakeup sets or clears XDP_RING_NEED_WAKEUP on the TX and fill
// rings, as the kernel does when it stops polling them.
func (f *Fake) SetNeedWakeup(tx, fill bool) {
	set := func(flags *atomic.Uint32, on bool) {
		if on {
			flags.Store(needWakeupFlag)
		} else {
			flags.Store(0)
		}
	}
	set(&f.tx.flags, tx)
	set(&f.fill.flags, fill)
}

// SetBusyPoll marks the fake's rings as busy-polling, as Socket.SetBusyPoll
// does: BusyPoll then wakes RX on every call and KickRX never does.
func (f *Fake) SetBusyPoll(on bool) { f.r.busyPoll = on }

// Kicks returns how many times the user side woke the kernel for TX and
// for the fill ring.
func (f *Fake) Kicks() (tx, rx uint64) { return f.kicksTX.Load(), f.kicksRX.Load() }

func (f *Fake) wakeTX() error { f.kicksTX.Add(1); return nil }
func (f *Fake) wakeRX() error { f.kicksRX.Add(1); return nil }

// Deliver plays the kernel receiving pkt: it takes a chunk from the fill
// ring, copies pkt to UMEM.Headroom() bytes into it and puts a descriptor
// on RX. It reports false, counting the reason like the kernel, when RX is
// full, the fill ring is empty or pkt does not fit in a chunk.
func (f *Fake) Deliver(pkt []byte) bool {
	u := &f.r.UMEM
	if len(pkt) > int(u.frameSize)-u.headroom {
		f.rxDropped.Add(1)
		return false
	}
	rxSize := uint32(len(f.r.RX.descs))
	// (A) on RX: is there room?
	rxProd := f.rx.producer.Load()
	if rxProd-f.rx.consumer.Load() >= rxSize {
		f.rxRingFull.Add(1)
		return false
	}
	// (C) on fill: is there a chunk?
	fillCons := f.fill.consumer.Load()
	if f.fill.producer.Load() == fillCons {
		f.rxFillEmpty.Add(1)
		return false
	}
	addr := f.r.Fill.addrs[fillCons&f.r.Fill.mask]&u.chunkMask + uint64(u.headroom)
	// (D) on fill: the slot is read, give it back.
	f.fill.consumer.Store(fillCons + 1)
	copy(u.mem[addr:], pkt)
	f.r.RX.descs[rxProd&f.r.RX.mask] = Desc{Addr: addr, Len: uint32(len(pkt))}
	// (B) on RX: publish after the descriptor and the packet bytes.
	f.rx.producer.Store(rxProd + 1)
	return true
}

// Transmit plays the kernel draining TX: for up to max descriptors it
// calls sent with the packet (valid only during the call), then puts the
// address on the completion ring. An invalid descriptor (outside the UMEM
// or crossing a chunk) is skipped and counted, and its frame never
// completes, as in the kernel. It stops early when the completion ring is
// full, and returns how many packets it sent.
func (f *Fake) Transmit(max int, sent func(pkt []byte)) int {
	txProd := f.tx.producer.Load() // (C)
	txCons := f.tx.consumer.Load()
	if txProd == txCons {
		f.txEmpty.Add(1)
		return 0
	}
	compProd := f.completion.producer.Load()
	compFree := uint32(len(f.r.Completion.addrs)) - (compProd - f.completion.consumer.Load()) // (A)
	n := 0
	for txCons != txProd && n < max && compFree > 0 {
		d := f.r.TX.descs[txCons&f.r.TX.mask]
		txCons++
		if !f.r.UMEM.Contains(d) {
			f.txInvalid.Add(1)
			continue
		}
		if sent != nil {
			sent(f.r.UMEM.Frame(d))
		}
		f.r.Completion.addrs[compProd&f.r.Completion.mask] = d.Addr
		compProd++
		compFree--
		n++
	}
	f.completion.producer.Store(compProd) // (B)
	f.tx.consumer.Store(txCons)           // (D)
	return n
}
