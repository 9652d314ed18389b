//go:build linux

package ring

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

var _ Queue = (*Socket)(nil)

// Socket is an AF_XDP socket bound to one queue of one interface, with its
// own UMEM. Exactly one goroutine owns it (see the package documentation);
// only Stats, FD, UMEMFD and Options may be called from others.
type Socket struct {
	r        Rings
	fd       int
	umemFD   int // the sealed memfd behind umem (see handover_linux.go)
	zeroCopy bool
	// copyReason is the zero-copy bind's error when BindAuto fell back.
	copyReason error
	opts       Options // with defaults applied
	umem       []byte
	maps       [4][]byte // RX, TX, fill, completion ring mappings
	bell       doorbell
}

// doorbell is an eventfd that Poll waits on beside the socket, so another
// goroutine can wake an owner asleep on an idle queue (Ring): a request
// to the worker (a lookup's key, a status tally) is then answered at once
// instead of after the rest of the idle wait. Its mutex orders Ring and
// Close, so a ring after Close writes to no descriptor that has been
// reused; the owner's Poll reads fd alone (EnableDoorbell before the owner
// runs, Close after it stopped).
type doorbell struct {
	mu sync.Mutex
	fd int // valid while on
	on bool
}

// Open creates the socket, registers and maps the UMEM and the four rings,
// binds to o.Ifindex/o.Queue with XDP_USE_NEED_WAKEUP (zero-copy or copy
// per o.Bind), and puts as many chunks on the fill ring as it holds. The
// socket receives nothing until its FD is in the XSKMAP of an attached XDP
// program (package ring/xsk). The UMEM is a sealed memfd mapped shared, so
// the socket can be handed to another process (Adopt).
func Open(o Options) (_ *Socket, err error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("open xdp socket: %w", err)
	}
	o = o.withDefaults()
	if o.Ifindex <= 0 {
		return nil, fmt.Errorf("open xdp socket: %w: ifindex %d", errOptions, o.Ifindex)
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open xdp socket: %w", err)
	}
	s := &Socket{fd: fd, umemFD: -1, opts: o}
	defer func() {
		if err != nil {
			s.Close() // undo every step done so far; the bind error is what matters
		}
	}()
	if s.umemFD, err = newUMEMFile(o); err != nil {
		return nil, err
	}
	if s.umem, err = mapUMEM(s.umemFD, o); err != nil {
		return nil, err
	}
	if err := registerUMEM(fd, s.umem, o.FrameSize, o.ExtraHeadroom); err != nil {
		return nil, fmt.Errorf("register umem: %w", err)
	}
	for _, opt := range []struct {
		name string
		opt  int
	}{
		{"fill", unix.XDP_UMEM_FILL_RING},
		{"completion", unix.XDP_UMEM_COMPLETION_RING},
		{"rx", unix.XDP_RX_RING},
		{"tx", unix.XDP_TX_RING},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, opt.opt, o.RingSize); err != nil {
			return nil, fmt.Errorf("set %s ring size %d: %w", opt.name, o.RingSize, err)
		}
	}
	if err := s.mapRings(); err != nil {
		return nil, err
	}
	s.r.init(o)

	if err := s.bind(o); err != nil {
		return nil, err
	}
	if s.zeroCopy, err = boundZeroCopy(fd); err != nil {
		return nil, err
	}
	// Frames go on the fill ring before the XDP program can redirect here.
	s.r.Refill()
	return s, nil
}

// mapRings maps the four rings of s.fd (sized s.opts.RingSize) and points
// the Rings at them and at the UMEM. The caller then runs init or adopt.
func (s *Socket) mapRings() error {
	var off unix.XDPMmapOffsets
	if err := getsockoptStruct(s.fd, unix.XDP_MMAP_OFFSETS, &off); err != nil {
		return fmt.Errorf("get ring mmap offsets: %w", err)
	}
	n := uint64(s.opts.RingSize)
	rings := []struct {
		name  string
		pgoff int64
		off   unix.XDPRingOffset
		size  uint64 // bytes of one slot
	}{
		{"rx", unix.XDP_PGOFF_RX_RING, off.Rx, 16},
		{"tx", unix.XDP_PGOFF_TX_RING, off.Tx, 16},
		{"fill", unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, 8},
		{"completion", unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, 8},
	}
	for i, rg := range rings {
		m, err := unix.Mmap(s.fd, rg.pgoff, int(rg.off.Desc+n*rg.size),
			unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			if errors.Is(err, unix.EBUSY) {
				// Before Linux 6.4 a bound socket's rings cannot be mapped
				// again (xsk_mmap accepted only XSK_READY).
				err = fmt.Errorf("%w: %w", ErrRemapUnsupported, err)
			}
			return fmt.Errorf("mmap %s ring: %w", rg.name, err)
		}
		s.maps[i] = m
	}
	r := &s.r
	slots := s.opts.RingSize
	r.RX.producer, r.RX.consumer, r.RX.flags = u32At(s.maps[0], off.Rx.Producer), u32At(s.maps[0], off.Rx.Consumer), u32At(s.maps[0], off.Rx.Flags)
	r.RX.descs = descsAt(s.maps[0], off.Rx.Desc, slots)
	r.TX.producer, r.TX.consumer, r.TX.flags = u32At(s.maps[1], off.Tx.Producer), u32At(s.maps[1], off.Tx.Consumer), u32At(s.maps[1], off.Tx.Flags)
	r.TX.descs = descsAt(s.maps[1], off.Tx.Desc, slots)
	r.Fill.producer, r.Fill.consumer, r.Fill.flags = u32At(s.maps[2], off.Fr.Producer), u32At(s.maps[2], off.Fr.Consumer), u32At(s.maps[2], off.Fr.Flags)
	r.Fill.addrs = addrsAt(s.maps[2], off.Fr.Desc, slots)
	r.Completion.producer, r.Completion.consumer, r.Completion.flags = u32At(s.maps[3], off.Cr.Producer), u32At(s.maps[3], off.Cr.Consumer), u32At(s.maps[3], off.Cr.Flags)
	r.Completion.addrs = addrsAt(s.maps[3], off.Cr.Desc, slots)
	r.UMEM.mem = s.umem
	r.waker = s
	return nil
}

// boundZeroCopy reports what mode the kernel bound fd in (XDP_OPTIONS).
func boundZeroCopy(fd int) (bool, error) {
	var opts struct{ Flags uint32 }
	if err := getsockoptStruct(fd, unix.XDP_OPTIONS, &opts); err != nil {
		return false, fmt.Errorf("get xdp options: %w", err)
	}
	return opts.Flags&unix.XDP_OPTIONS_ZEROCOPY != 0, nil
}

// bind binds the socket, trying zero-copy first in BindAuto mode. The
// kernel leaves a socket unbound when bind fails, so the copy-mode retry
// reuses the same socket, UMEM and rings.
func (s *Socket) bind(o Options) error {
	sa := unix.SockaddrXDP{Ifindex: uint32(o.Ifindex), QueueID: uint32(o.Queue)}
	try := func(mode uint16) error {
		sa.Flags = mode | unix.XDP_USE_NEED_WAKEUP
		return unix.Bind(s.fd, &sa)
	}
	switch o.Bind {
	case BindZeroCopy:
		if err := try(unix.XDP_ZEROCOPY); err != nil {
			return fmt.Errorf("bind ifindex %d queue %d zero-copy: %w", o.Ifindex, o.Queue, err)
		}
	case BindCopy:
		if err := try(unix.XDP_COPY); err != nil {
			return fmt.Errorf("bind ifindex %d queue %d copy mode: %w", o.Ifindex, o.Queue, err)
		}
	default:
		zcErr := try(unix.XDP_ZEROCOPY)
		if zcErr == nil {
			return nil
		}
		if err := try(unix.XDP_COPY); err != nil {
			return fmt.Errorf("bind ifindex %d queue %d: zero-copy: %v; copy mode: %w", o.Ifindex, o.Queue, zcErr, err)
		}
		s.copyReason = zcErr
	}
	return nil
}

// Rings returns the rings the owner goroutine drives.
func (s *Socket) Rings() *Rings { return &s.r }

// FD returns the socket's file descriptor, for XSKMAP registration and poll.
func (s *Socket) FD() int { return s.fd }

// ZeroCopy reports whether the kernel bound the socket in zero-copy mode
// (XDP_OPTIONS_ZEROCOPY); false means copy mode.
func (s *Socket) ZeroCopy() bool { return s.zeroCopy }

// CopyReason returns why BindAuto fell back to copy mode: the kernel's
// answer to the zero-copy bind (nil when it did not fall back).
func (s *Socket) CopyReason() error { return s.copyReason }

// Stats reads the kernel's counters (XDP_STATISTICS). Safe from any
// goroutine while the socket is open.
func (s *Socket) Stats() (Stats, error) {
	var ks unix.XDPStatistics
	if err := getsockoptStruct(s.fd, unix.XDP_STATISTICS, &ks); err != nil {
		return Stats{}, fmt.Errorf("get xdp statistics: %w", err)
	}
	return Stats{
		RXDropped:        ks.Rx_dropped,
		RXInvalidDescs:   ks.Rx_invalid_descs,
		TXInvalidDescs:   ks.Tx_invalid_descs,
		RXRingFull:       ks.Rx_ring_full,
		RXFillRingEmpty:  ks.Rx_fill_ring_empty_descs,
		TXRingEmptyDescs: ks.Tx_ring_empty_descs,
	}, nil
}

// Poll waits up to timeoutMs for RX entries or an error on the socket, or
// for a Ring of its doorbell (EINTR is not an error). For an idle worker;
// the busy path never calls it. A ring is consumed here: a read of the
// eventfd, only when it rang.
func (s *Socket) Poll(timeoutMs int) error {
	fds := [2]unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}, {Fd: -1}}
	n := 1
	if s.bell.on {
		fds[1] = unix.PollFd{Fd: int32(s.bell.fd), Events: unix.POLLIN}
		n = 2
	}
	_, err := unix.Poll(fds[:n], timeoutMs)
	if err != nil && !errors.Is(err, unix.EINTR) {
		return err
	}
	if fds[1].Revents&unix.POLLIN != 0 {
		var b [8]byte
		unix.Read(s.bell.fd, b[:]) // EAGAIN: another poll took it
	}
	return nil
}

// EnableDoorbell gives the socket its doorbell (an eventfd) if it has none.
// Call it before the owner's first Poll.
func (s *Socket) EnableDoorbell() error {
	s.bell.mu.Lock()
	defer s.bell.mu.Unlock()
	if s.bell.on {
		return nil
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("doorbell eventfd: %w", err)
	}
	s.bell.fd, s.bell.on = fd, true
	return nil
}

// Ring wakes the owner if it sleeps in Poll, or makes its next Poll
// return at once. Safe from any goroutine; nothing without a doorbell or
// after Close.
func (s *Socket) Ring() {
	s.bell.mu.Lock()
	defer s.bell.mu.Unlock()
	if s.bell.on {
		one := [8]byte{1}             // a nonzero count in either byte order
		unix.Write(s.bell.fd, one[:]) // EAGAIN: the count is full, so it rang
	}
}

// SetBusyPoll turns preferred busy polling on for the socket (b.Timeout >
// 0) or off, and tells the rings so: with it on, the owner's BusyPoll runs
// the queue's NAPI poll once per loop, and KickRX no longer does. Setting
// SO_BUSY_POLL above net.core.busy_read needs CAP_NET_ADMIN. The options
// belong to the socket, so they stay with it when it is handed over
// (Adopt); the successor calls SetBusyPoll with its own configuration.
func (s *Socket) SetBusyPoll(b BusyPoll) error {
	if err := b.Validate(); err != nil {
		return fmt.Errorf("set busy poll: %w", err)
	}
	on := b.Timeout > 0
	budget := b.Budget
	if budget == 0 {
		budget = DefaultBusyPollBudget
	}
	prefer, usec := 0, 0
	if on {
		prefer, usec = 1, int(b.Timeout/time.Microsecond)
		if usec == 0 {
			usec = 1
		}
	}
	for _, o := range []struct {
		name string
		opt  int
		val  int
	}{
		{"SO_PREFER_BUSY_POLL", unix.SO_PREFER_BUSY_POLL, prefer},
		{"SO_BUSY_POLL", unix.SO_BUSY_POLL, usec},
		{"SO_BUSY_POLL_BUDGET", unix.SO_BUSY_POLL_BUDGET, budget},
	} {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, o.opt, o.val); err != nil {
			return fmt.Errorf("set busy poll: %s %d: %w", o.name, o.val, err)
		}
	}
	s.r.busyPoll = on
	return nil
}

// Close unmaps the rings and the UMEM and closes the socket and the UMEM's
// memfd. Slices from Frame and Chunk must not be used afterwards. Close
// never detaches anything: when another process holds the socket (Adopt),
// the socket, its XSKMAP slot and its UMEM live on there.
func (s *Socket) Close() error {
	var errs []error
	for i, m := range s.maps {
		if m != nil {
			if err := unix.Munmap(m); err != nil {
				errs = append(errs, fmt.Errorf("unmap ring %d: %w", i, err))
			}
			s.maps[i] = nil
		}
	}
	if s.fd >= 0 {
		if err := unix.Close(s.fd); err != nil {
			errs = append(errs, fmt.Errorf("close xdp socket: %w", err))
		}
		s.fd = -1
	}
	if s.umem != nil {
		if err := unix.Munmap(s.umem); err != nil {
			errs = append(errs, fmt.Errorf("unmap umem: %w", err))
		}
		s.umem = nil
	}
	if s.umemFD >= 0 {
		if err := unix.Close(s.umemFD); err != nil {
			errs = append(errs, fmt.Errorf("close umem memfd: %w", err))
		}
		s.umemFD = -1
	}
	s.bell.mu.Lock()
	if s.bell.on {
		if err := unix.Close(s.bell.fd); err != nil {
			errs = append(errs, fmt.Errorf("close doorbell: %w", err))
		}
		s.bell.on = false
	}
	s.bell.mu.Unlock()
	s.r = Rings{}
	return errors.Join(errs...)
}

// wakeTX is the TX kick: sendto with no data and MSG_DONTWAIT
// (net/xdp/xsk.c xsk_sendmsg). Transient errors mean the kernel is already
// working on the ring.
func (s *Socket) wakeTX() error {
	_, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return kickErr(errno)
}

// wakeRX is the fill-ring kick: recvfrom with no buffer and MSG_DONTWAIT
// (net/xdp/xsk.c xsk_recvmsg), as libxdp's samples do.
func (s *Socket) wakeRX() error {
	_, _, errno := unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return kickErr(errno)
}

func kickErr(errno unix.Errno) error {
	switch errno {
	case 0, unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.EINTR:
		return nil
	}
	return errno
}
