package ring

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDoorbell: Poll sleeps its timeout on a quiet socket; a Ring, before
// or during the Poll, makes it return at once, once (two rings are one
// wake); after Close a Ring writes nothing. The socket is a pipe's read
// end, which never becomes readable: Poll only sees the doorbell.
func TestDoorbell(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	s := &Socket{fd: p[0], umemFD: -1}
	defer s.Close()

	// How long Poll(ms) takes. Sleeps are never shorter than asked, so the
	// lower bounds hold on any machine; the upper bound of a rung Poll is
	// a tenth of its timeout.
	poll := func(ms int) time.Duration {
		start := time.Now()
		if err := s.Poll(ms); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	const long = 2000
	if d := poll(20); d < 20*time.Millisecond {
		t.Fatalf("Poll(20) without a doorbell returned after %v", d)
	}
	s.Ring() // no doorbell yet: nothing
	if d := poll(20); d < 20*time.Millisecond {
		t.Fatalf("Poll(20) after a Ring without a doorbell returned after %v", d)
	}
	if err := s.EnableDoorbell(); err != nil {
		t.Fatal(err)
	}
	if err := s.EnableDoorbell(); err != nil { // a second call keeps the first
		t.Fatal(err)
	}
	if d := poll(20); d < 20*time.Millisecond {
		t.Fatalf("Poll(20) with a quiet doorbell returned after %v", d)
	}

	s.Ring()
	s.Ring()
	if d := poll(long); d > long/10*time.Millisecond {
		t.Errorf("Poll after two Rings took %v", d)
	}
	if d := poll(20); d < 20*time.Millisecond {
		t.Errorf("the second Poll after two Rings returned after %v: the rings were not consumed as one", d)
	}

	go func() {
		time.Sleep(10 * time.Millisecond)
		s.Ring()
	}()
	if d := poll(long); d > long/10*time.Millisecond {
		t.Errorf("Poll rung while asleep took %v", d)
	}

	bell := s.bell.fd
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.bell.on {
		t.Fatal("the doorbell is on after Close")
	}
	// Its number may be another file's now: a Ring must not write there.
	var q [2]int
	if err := unix.Pipe2(q[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(q[0])
	defer unix.Close(q[1])
	s.Ring()
	for _, fd := range q {
		if fd == bell {
			var b [8]byte
			if n, _ := unix.Read(q[0], b[:]); n > 0 {
				t.Errorf("a Ring after Close wrote %d bytes into the descriptor the doorbell had", n)
			}
		}
	}
}
