package pktgen

import (
	"github.com/xlbnet/xlb/ring"
)

// sender drives one queue's TX side: it takes free chunks, lets the
// Generator write the varying fields into them, submits them in batches
// and reclaims completed ones. It owns the Rings (one goroutine) and
// allocates nothing after newSender.
type sender struct {
	r     *ring.Rings
	gen   *Generator
	addrs []uint64
	descs []ring.Desc

	Submitted uint64 // descriptors put on the TX ring
	Completed uint64 // descriptors the kernel (or Fake) has sent
}

// newSender writes the template into every free chunk of r (fields that
// never vary are written once, here) and returns the sender.
func newSender(r *ring.Rings, gen *Generator, batch int) *sender {
	s := &sender{r: r, gen: gen, addrs: make([]uint64, max(batch, r.Frames.Len())), descs: make([]ring.Desc, batch)}
	n := r.Frames.Alloc(s.addrs)
	for _, a := range s.addrs[:n] {
		copy(r.UMEM.Chunk(a), gen.Template())
	}
	r.Frames.Free(s.addrs[:n])
	s.addrs = s.addrs[:batch]
	return s
}

// Reclaim takes completed frames back and counts them.
func (s *sender) Reclaim() {
	s.Completed += uint64(s.r.Reclaim())
}

// Send submits up to max packets (at most the batch size) and returns how
// many went on the TX ring; fewer when the ring or the free chunks run
// short. It does not wake the kernel: call Kick.
func (s *sender) Send(max int) int {
	n := min(max, len(s.descs))
	n = s.r.TX.Reserve(n)
	n = s.r.Frames.Alloc(s.addrs[:n])
	size := uint32(s.gen.Size())
	for i, a := range s.addrs[:n] {
		s.gen.Next(s.r.UMEM.Chunk(a))
		s.descs[i] = ring.Desc{Addr: a, Len: size}
	}
	s.r.TX.Submit(s.descs[:n])
	s.Submitted += uint64(n)
	return n
}

// Kick wakes the kernel if it asked (see ring.Rings.KickTX).
func (s *sender) Kick() error { return s.r.KickTX() }

// Outstanding is how many submitted packets have not completed.
func (s *sender) Outstanding() uint64 { return s.Submitted - s.Completed }
