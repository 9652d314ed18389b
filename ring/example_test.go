package ring_test

import (
	"fmt"

	"github.com/xlbnet/xlb/ring"
)

// A queue's worker loop, driven here by a Fake instead of the kernel: take
// a batch from RX, rewrite each frame in place, send it back out on TX,
// and keep the fill ring topped up from completed frames.
func Example() {
	q, err := ring.NewFake(ring.Options{FrameSize: 2048, NumFrames: 64, RingSize: 16})
	if err != nil {
		panic(err)
	}
	r := q.Rings() // once per worker: no interface call per packet

	r.Refill()
	for _, p := range []string{"one", "two", "three"} {
		q.Deliver([]byte(p)) // the "kernel" receives
	}

	descs := make([]ring.Desc, 64) // the worker's batch, allocated once
	n := r.RX.Peek(descs[:r.TX.Reserve(len(descs))])
	for i, d := range descs[:n] {
		// Prepend two bytes in the headroom, as encapsulation would.
		d.Addr -= 2
		d.Len += 2
		copy(r.Frame(d), "> ")
		descs[i] = d
	}
	r.RX.Release(n)
	r.TX.Submit(descs[:n])
	if err := r.KickTX(); err != nil {
		panic(err)
	}

	q.Transmit(64, func(p []byte) { fmt.Printf("%s\n", p) }) // the "kernel" sends
	fmt.Println("reclaimed", r.Reclaim(), "refilled", r.Refill())
	// Output:
	// > one
	// > two
	// > three
	// reclaimed 3 refilled 3
}
