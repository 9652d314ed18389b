package spsc

import (
	"sync"
	"testing"
)

type item struct {
	seq  uint64
	data [7]uint64 // the size of a real element: several words
}

func TestRingSizes(t *testing.T) {
	for _, tc := range []struct{ size, cap int }{{1, 1}, {2, 2}, {3, 4}, {1000, 1024}, {1024, 1024}} {
		r, err := New[item](tc.size)
		if err != nil || r.Cap() != tc.cap {
			t.Errorf("New(%d): cap %d, err %v; want cap %d", tc.size, r.Cap(), err, tc.cap)
		}
	}
	for _, size := range []int{0, -1, 1<<30 + 1} {
		if _, err := New[item](size); err == nil {
			t.Errorf("New(%d) accepted", size)
		}
	}
}

// TestRingOrderAndFull fills and drains a ring across many wraps: FIFO
// order, refusals counted exactly when full, Len and Free agree.
func TestRingOrderAndFull(t *testing.T) {
	r, _ := New[item](8)
	var next, want uint64
	dst := make([]item, 3)
	refused := uint64(0)
	for round := range 100 {
		pushes := 1 + round%11
		for range pushes {
			free := r.Free()
			ok := r.Push(&item{seq: next})
			if ok != (free > 0) {
				t.Fatalf("round %d: push ok=%v with %d free", round, ok, free)
			}
			if ok {
				next++
			} else {
				refused++
			}
		}
		if got := r.Len(); got != int(next-want) {
			t.Fatalf("round %d: Len %d, want %d", round, got, next-want)
		}
		for range round % 4 {
			n := r.Pop(dst)
			for _, it := range dst[:n] {
				if it.seq != want {
					t.Fatalf("popped %d, want %d", it.seq, want)
				}
				want++
			}
		}
	}
	if r.Full() != refused || refused == 0 {
		t.Errorf("Full %d, refused %d (want equal and > 0)", r.Full(), refused)
	}
	for n := r.Pop(dst); n > 0; n = r.Pop(dst) {
		want += uint64(n)
	}
	if want != next || r.Len() != 0 || r.Free() != r.Cap() {
		t.Errorf("after draining: popped up to %d of %d, Len %d, Free %d", want, next, r.Len(), r.Free())
	}
}

// TestRingConcurrent runs a producer and a consumer on two goroutines (the
// race detector checks the publication order): every pushed element
// arrives once, in order, intact.
func TestRingConcurrent(t *testing.T) {
	r, _ := New[item](64)
	const n = 50000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint64(0); i < n; {
			it := item{seq: i}
			for j := range it.data {
				it.data[j] = i*8 + uint64(j)
			}
			if r.Push(&it) {
				i++
			}
		}
	}()
	dst := make([]item, 16)
	for want := uint64(0); want < n; {
		k := r.Pop(dst)
		for _, it := range dst[:k] {
			if it.seq != want {
				t.Fatalf("got %d, want %d", it.seq, want)
			}
			for j, v := range it.data {
				if v != want*8+uint64(j) {
					t.Fatalf("element %d torn: word %d is %d", want, j, v)
				}
			}
			want++
		}
	}
	wg.Wait()
}

func TestRingAllocatesNothing(t *testing.T) {
	r, _ := New[item](16)
	dst := make([]item, 4)
	it := item{seq: 1}
	if a := testing.AllocsPerRun(1000, func() {
		r.Push(&it)
		r.Push(&it)
		r.Pop(dst)
		r.Free()
	}); a != 0 {
		t.Errorf("%v allocations per push/pop", a)
	}
}

// BenchmarkRing is one Push and its share of a batched Pop on one
// goroutine (the cost the producer adds per element).
func BenchmarkRing(b *testing.B) {
	r, _ := New[item](1024)
	dst := make([]item, 64)
	it := item{}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Push(&it)
		if i++; i == 64 {
			r.Pop(dst)
			i = 0
		}
	}
}
