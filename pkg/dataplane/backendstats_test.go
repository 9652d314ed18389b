package dataplane

import (
	"math/rand/v2"
	"sync"
	"testing"
)

func TestBackendStatsCounts(t *testing.T) {
	var s BackendStats
	want := map[[2]uint32]Totals{}
	rng := rand.New(rand.NewPCG(7, 7))
	for batch := range 200 {
		for range rng.IntN(Batch) + 1 {
			// Runs of one flow mixed with others, slots growing over time.
			r, b := uint16(rng.IntN(3+batch/20)), uint32(rng.IntN(5+batch/10))
			for range rng.IntN(4) + 1 {
				size, isNew := uint32(40+rng.IntN(1400)), rng.IntN(3) == 0
				s.Count(r, b, size, isNew)
				w := want[[2]uint32{uint32(r), b}]
				w.Packets++
				w.Bytes += uint64(size)
				if isNew {
					w.Conns++
				}
				want[[2]uint32{uint32(r), b}] = w
			}
		}
		s.Flush()
		// Readers see everything up to the last Flush, exactly.
		for k, n := range want {
			if got := s.Totals(uint16(k[0]), k[1]); got != n {
				t.Fatalf("batch %d: rule %d backend %d: %+v, want %+v", batch, k[0], k[1], got, n)
			}
		}
	}
	if got := s.Packets(999, 0) + s.Packets(0, 1<<20); got != 0 {
		t.Errorf("slots never counted report %d", got)
	}
}

func TestBackendStatsPendingRunNotPublished(t *testing.T) {
	var s BackendStats
	s.Count(1, 2, 100, false)
	s.Count(1, 2, 100, false)
	if got := s.Packets(1, 2); got != 0 {
		t.Errorf("before Flush: %d", got)
	}
	s.Flush()
	s.Flush() // nothing pending: no double count
	if got := s.Packets(1, 2); got != 2 {
		t.Errorf("after Flush: %d, want 2", got)
	}
}

// TestBackendStatsConcurrentReaders runs under -race: a reader polls while
// the worker counts and grows the table.
func TestBackendStatsConcurrentReaders(t *testing.T) {
	var s BackendStats
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			n := s.Packets(0, 0)
			if n < last {
				t.Errorf("count went backwards: %d after %d", n, last)
				return
			}
			last = n
		}
	}()
	for i := range 20000 {
		s.Count(0, 0, 100, false)
		s.Count(uint16(i%50), uint32(i%300), 100, false)
		if i%64 == 0 {
			s.Flush()
		}
	}
	s.Flush()
	close(stop)
	wg.Wait()
	if got := s.Packets(0, 0); got != 20000+67 {
		t.Errorf("rule 0 backend 0: %d", got)
	}
}

func TestBackendStatsNoAllocs(t *testing.T) {
	var s BackendStats
	s.Count(3, 40, 100, false) // grow once
	s.Count(0, 0, 100, false)
	s.Flush()
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		for range Batch {
			s.Count(uint16(i%4), uint32(i%41), 100, false)
			i++
		}
		s.Flush()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per batch, want 0", allocs)
	}
}

func BenchmarkBackendStatsCount(b *testing.B) {
	for _, bc := range []struct {
		name  string
		flows int
	}{{"one-flow", 1}, {"alternating", 2}, {"spread", 64}} {
		b.Run(bc.name, func(b *testing.B) {
			var s BackendStats
			s.Count(0, 63, 100, false)
			s.Flush()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.Count(0, uint32(i%bc.flows), 100, false)
				i++
				if i%Batch == 0 {
					s.Flush()
				}
			}
		})
	}
}
