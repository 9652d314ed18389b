package probepath

import (
	"sync"
	"time"
)

// portKey names a probe socket by what its packets carry: the appliance's
// address (IPv4 mapped into IPv6, as packet.Tuple has it), the transport
// protocol and the local port.
type portKey struct {
	addr  [16]byte
	proto uint8
	port  uint16
}

// registry maps probe sockets' local ports to their probes. Dial puts, the
// reader gets; a lock is cheap at probe rates (a few packets per probe).
//
// A registration is never removed when its socket closes: the socket may
// still send (a FIN, an ACK from TIME_WAIT) and those packets must reach
// the same backend. The kernel gives a port to a new socket only once the
// old one is gone entirely, so a new registration simply replaces the old;
// registrations released longer than linger ago are swept now and then so
// that removed targets do not stay referenced.
type registry struct {
	mu      sync.RWMutex
	m       map[portKey]*entry
	puts    int
	linger  time.Duration
	sweepAt int // sweep every sweepAt puts
}

// lingerAfterClose outlasts TIME_WAIT (60 s on Linux).
const lingerAfterClose = 2 * time.Minute

func (r *registry) init() {
	r.m = map[portKey]*entry{}
	r.linger = lingerAfterClose
	r.sweepAt = 1024
}

func (r *registry) put(k portKey, e *entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[k] = e
	r.puts++
	if r.puts%r.sweepAt == 0 {
		r.sweep(time.Now())
	}
}

func (r *registry) get(k portKey) *entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.m[k]
}

func (r *registry) len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.m)
}

// sweep forgets registrations released before now - linger; r.mu is held.
func (r *registry) sweep(now time.Time) {
	before := now.Add(-r.linger).UnixNano()
	for k, e := range r.m {
		if at := e.releasedAt.Load(); at != 0 && at < before {
			delete(r.m, k)
		}
	}
}
