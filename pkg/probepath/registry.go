package probepath

import (
	"net/netip"
	"sync"
	"time"
)

// flowKey names a probe socket by what its packets carry: protocol, the
// appliance's address and port, the VIP and port (addresses IPv4-mapped,
// as packet.Tuple has them). Two probes of different VIPs may share a
// local port.
type flowKey struct {
	src, dst     [16]byte
	sport, dport uint16
	proto        uint8
}

func flowOf(proto uint8, local, remote netip.AddrPort) flowKey {
	return flowKey{src: local.Addr().As16(), dst: remote.Addr().As16(), sport: local.Port(), dport: remote.Port(), proto: proto}
}

// registry maps probe sockets' flows to their probes. Dial puts, the
// reader gets; a lock is cheap at probe rates (a few packets per probe).
//
// A TCP socket's port is known only after connect has sent its SYN into
// the TUN: a SYN the reader cannot place yet is parked (a copy, at most
// maxParked, for parkFor) and handed to the put of its flow, both under
// the lock, so none is lost between the two.
//
// A registration is not removed when its socket closes: the socket may
// still send (a FIN, an ACK from TIME_WAIT) and those packets must reach
// the same backend. The kernel gives a 4-tuple to a new socket only once
// the old one is gone, so a new registration simply replaces the old;
// registrations released longer than linger ago are swept now and then so
// that removed targets do not stay referenced.
type registry struct {
	mu      sync.Mutex
	m       map[flowKey]*entry
	parked  map[flowKey]parkedPacket
	puts    int
	linger  time.Duration
	sweepAt int // sweep every sweepAt puts
}

type parkedPacket struct {
	pkt []byte
	at  time.Time
}

const (
	// lingerAfterClose outlasts TIME_WAIT (60 s on Linux).
	lingerAfterClose = 65 * time.Second
	maxParked        = 256
	parkFor          = time.Second
)

func (r *registry) init() {
	r.m = map[flowKey]*entry{}
	r.parked = map[flowKey]parkedPacket{}
	r.linger = lingerAfterClose
	r.sweepAt = 1024
}

// put registers e for k and returns the packets parked for k.
func (r *registry) put(k flowKey, e *entry) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[k] = e
	r.puts++
	if r.puts%r.sweepAt == 0 {
		r.sweep(time.Now())
	}
	if pp, ok := r.parked[k]; ok {
		delete(r.parked, k)
		return [][]byte{pp.pkt}
	}
	return nil
}

// get returns k's probe, or nil; with park, a copy of pkt waits for k's
// registration (the latest one only: a SYN's retransmission replaces it).
func (r *registry) get(k flowKey, pkt []byte, park bool) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.m[k]; e != nil {
		return e
	}
	if park {
		now := time.Now()
		if len(r.parked) >= maxParked {
			for pk, pp := range r.parked {
				if now.Sub(pp.at) > parkFor {
					delete(r.parked, pk)
				}
			}
		}
		if len(r.parked) < maxParked {
			r.parked[k] = parkedPacket{pkt: append([]byte(nil), pkt...), at: now}
		}
	}
	return nil
}

func (r *registry) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// sweep forgets registrations released before now - linger, and parked
// packets nobody claimed; r.mu is held.
func (r *registry) sweep(now time.Time) {
	before := now.Add(-r.linger).UnixNano()
	for k, e := range r.m {
		if at := e.releasedAt.Load(); at != 0 && at < before {
			delete(r.m, k)
		}
	}
	for k, pp := range r.parked {
		if now.Sub(pp.at) > parkFor {
			delete(r.parked, k)
		}
	}
}
