package health

import (
	"container/heap"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// connector runs the connect-only TCP probes of a Checker that uses the
// default dialer and the real clock, on the scheduler's goroutine: each
// round of due probes opens non-blocking sockets and starts to connect
// them, then reads each one's TCP_INFO: a connection that is done (most,
// on a local network: a connect takes a round trip) ends there, with the
// round trip the kernel measured; one still connecting joins an epoll
// instance, which the scheduler's next rounds (at most schedulerTick
// apart) take it from, or it times out. A probe that connects within its
// round costs six system calls (socket, two setsockopt, connect,
// getsockopt TCP_INFO, close); one that takes longer adds an epoll_ctl
// and a share of the epoll_pwait of the rounds it waits; no goroutine,
// no context, no wake-up of its own (doc.go, "Decisions").
type connector struct {
	c    *Checker
	epfd int // -1: no epoll instance, every probe fails saying so

	mu        sync.Mutex
	next      uint64 // the id of the next connection
	inflight  map[uint64]*connecting
	byTarget  map[*target]*connecting
	deadlines timeHeap[*connecting]
	events    []unix.EpollEvent
	fresh     []started // connects of this round, looked at by its harvest
}

// started is a connect begun in this round, not yet looked at.
type started struct {
	t     *target
	fd    int
	began time.Time
}

// connecting is one probe's connection in flight.
type connecting struct {
	id       uint64
	t        *target
	fd       int
	began    time.Time
	deadline time.Time
	index    int // in connector.deadlines
}

// ended is a probe the connector finished, to report outside its lock.
type ended struct {
	t *target
	r Result
}

var errNoEpoll = errors.New("no epoll instance")

func newConnector(c *Checker) *connector {
	k := &connector{c: c, next: 1, inflight: map[uint64]*connecting{}, byTarget: map[*target]*connecting{}, events: make([]unix.EpollEvent, 256)}
	var err error
	if k.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		k.epfd = -1
	}
	return k
}

// start begins t's probe; it never waits for the network. Called by the
// scheduler.
func (k *connector) start(t *target, now time.Time) {
	if t.ctx.Err() != nil {
		k.c.finish(t, Result{})
		return
	}
	if k.epfd < 0 {
		k.c.finish(t, t.p.fail(fmt.Errorf("connect: %w", errNoEpoll)))
		return
	}
	fd, err := connectNonblocking(t.p.addr)
	switch {
	case err == nil: // connected at once
		r := unweightedPass
		r.Latency = rtt(fd, now)
		rawClose(fd)
		k.c.finish(t, r)
		return
	case err != unix.EINPROGRESS:
		if fd >= 0 {
			rawClose(fd)
		}
		k.c.finish(t, t.p.fail(fmt.Errorf("connect: %w", os.NewSyscallError("connect", err))))
		return
	}
	k.mu.Lock()
	k.fresh = append(k.fresh, started{t: t, fd: fd, began: now})
	k.mu.Unlock()
}

// look ends the connects of this round that are done, or whose target
// was removed since it started (Remove, which waits for them, found them
// nowhere else), and hands those still connecting to epoll. k.mu is held.
func (k *connector) look(done []ended) []ended {
	for i, s := range k.fresh {
		k.fresh[i] = started{}
		if s.t.ctx.Err() != nil {
			rawClose(s.fd)
			done = append(done, ended{s.t, Result{}}) // discarded
			continue
		}
		info, err := rawTCPInfo(s.fd)
		switch {
		case err != nil:
			rawClose(s.fd)
			done = append(done, ended{s.t, s.t.p.fail(fmt.Errorf("connect: %w", os.NewSyscallError("getsockopt TCP_INFO", err)))})
		case info.State == tcpSynSent || info.State == tcpSynRecv:
			if err := k.watch(s); err != nil {
				rawClose(s.fd)
				done = append(done, ended{s.t, s.t.p.fail(fmt.Errorf("connect: %w", os.NewSyscallError("epoll_ctl", err)))})
			}
		case info.State == tcpClose:
			r := s.t.p.fail(fmt.Errorf("connect: %w", os.NewSyscallError("connect", soError(s.fd))))
			r.Latency = time.Since(s.began)
			rawClose(s.fd)
			done = append(done, ended{s.t, r})
		default: // connected (the peer may have closed its end already)
			r := unweightedPass
			r.Latency = latency(info, s.began)
			rawClose(s.fd)
			done = append(done, ended{s.t, r})
		}
	}
	k.fresh = k.fresh[:0]
	return done
}

// watch hands a connect still in flight to epoll. k.mu is held.
func (k *connector) watch(s started) error {
	cn := &connecting{id: k.next, t: s.t, fd: s.fd, began: s.began, deadline: s.began.Add(s.t.p.timeout)}
	k.next++
	ev := unix.EpollEvent{Events: unix.EPOLLOUT}
	ev.Fd, ev.Pad = int32(cn.id), int32(cn.id>>32)
	if err := unix.EpollCtl(k.epfd, unix.EPOLL_CTL_ADD, s.fd, &ev); err != nil {
		return err
	}
	k.inflight[cn.id] = cn
	k.byTarget[s.t] = cn
	heap.Push(&k.deadlines, cn)
	return nil
}

// soError is the error a failed connect left on fd.
func soError(fd int) error {
	soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return err
	}
	if soErr == 0 {
		return unix.ECONNRESET // a hang-up without an error code
	}
	return unix.Errno(soErr)
}

// connectNonblocking opens a non-blocking TCP socket and starts to
// connect it to addr.
func connectNonblocking(addr netip.AddrPort) (int, error) {
	family := unix.AF_INET6
	if addr.Addr().Is4() {
		family = unix.AF_INET
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := rawSetsockopt(fd, unix.SOL_SOCKET, unix.SO_LINGER, unsafe.Pointer(&abortiveLinger), unsafe.Sizeof(abortiveLinger)); err != nil {
		rawClose(fd)
		return -1, os.NewSyscallError("setsockopt SO_LINGER", err)
	}
	if err := rawSetsockopt(fd, unix.IPPROTO_TCP, unix.TCP_QUICKACK, unsafe.Pointer(&delayedACK), unsafe.Sizeof(delayedACK)); err != nil {
		rawClose(fd)
		return -1, os.NewSyscallError("setsockopt TCP_QUICKACK", err)
	}
	return fd, rawConnect(fd, addr)
}

// A connect-only probe ends SYN, SYN-ACK, RST: the handshake's last ACK
// is delayed (TCP_QUICKACK off before connect), and close with a zero
// linger sends a reset at once instead of it, so the backend's kernel
// drops the half-open connection and its application never sees it, and
// neither end walks the FIN exchange or keeps a TIME_WAIT socket (doc.go,
// "Decisions").
var (
	abortiveLinger = unix.Linger{Onoff: 1, Linger: 0}
	delayedACK     = int32(0)
)

// rtt is the connection's round-trip time as the kernel measured it in
// the handshake: the probe's latency (since began, when unknown).
func rtt(fd int, began time.Time) time.Duration {
	info, err := rawTCPInfo(fd)
	if err != nil {
		return time.Since(began)
	}
	return latency(info, began)
}

// latency is the round trip of info, or the time since began when the
// kernel has none.
func latency(info unix.TCPInfo, began time.Time) time.Duration {
	if info.Rtt > 0 {
		return time.Duration(info.Rtt) * time.Microsecond
	}
	return time.Since(began)
}

// pending reports whether connections are in flight, and the earliest
// deadline among them.
func (k *connector) pending() (bool, time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.deadlines) == 0 {
		return false, time.Time{}
	}
	return true, k.deadlines[0].deadline
}

// expire ends t's connection in flight at the scheduler's next round (as
// a timeout; the Checker discards it, t being removed), and wakes the
// scheduler for it.
func (k *connector) expire(t *target) {
	k.mu.Lock()
	if cn := k.byTarget[t]; cn != nil {
		cn.deadline = time.Time{}
		heap.Fix(&k.deadlines, cn.index)
	}
	k.mu.Unlock()
	select {
	case k.c.wake <- struct{}{}:
	default:
	}
}

// harvest ends the connections epoll has ready and those past their
// deadline, and appends them to done for the scheduler to report. A
// connection that succeeded is reported as EPOLLOUT alone; an error adds
// EPOLLERR, and only then is SO_ERROR read for the message.
func (k *connector) harvest(now time.Time, done []ended) []ended {
	k.mu.Lock()
	defer k.mu.Unlock()
	done = k.look(done)
	if len(k.inflight) == 0 {
		return done
	}
	// Everything ready is taken before any deadline is looked at, so a
	// round late by more than a timeout still ends what did connect.
	for n := len(k.events); n == len(k.events); {
		n, _ = rawEpollPoll(k.epfd, k.events)
		done = k.ready(k.events[:n], now, done)
	}
	for len(k.deadlines) > 0 && !k.deadlines[0].deadline.After(now) {
		cn := k.deadlines[0]
		k.forget(cn)
		rawClose(cn.fd)
		r := cn.t.p.fail(fmt.Errorf("%w after %s: connect", ErrTimeout, cn.t.p.timeout))
		r.Latency = now.Sub(cn.began)
		done = append(done, ended{cn.t, r})
	}
	return done
}

// ready ends the connections of events. k.mu is held.
func (k *connector) ready(events []unix.EpollEvent, now time.Time, done []ended) []ended {
	for _, ev := range events {
		cn := k.inflight[uint64(uint32(ev.Fd))|uint64(uint32(ev.Pad))<<32]
		if cn == nil {
			continue
		}
		k.forget(cn)
		r := unweightedPass
		if ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			r.Latency = rtt(cn.fd, cn.began)
		} else {
			r = cn.t.p.fail(fmt.Errorf("connect: %w", os.NewSyscallError("connect", soError(cn.fd))))
			r.Latency = now.Sub(cn.began)
		}
		rawClose(cn.fd)
		done = append(done, ended{cn.t, r})
	}
	return done
}

// close releases the epoll instance; no connection is in flight (Stop
// waits for them first).
func (k *connector) close() {
	if k.epfd >= 0 {
		unix.Close(k.epfd)
		k.epfd = -1
	}
}

// forget drops cn from the connector's tables. k.mu is held.
func (k *connector) forget(cn *connecting) {
	delete(k.inflight, cn.id)
	delete(k.byTarget, cn.t)
	heap.Remove(&k.deadlines, cn.index)
}

func (cn *connecting) when() time.Time { return cn.deadline }
func (cn *connecting) setIndex(i int)  { cn.index = i }
