//go:build linux

package ring

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// A socket outlives its process when another process holds its fd: the
// kernel releases an AF_XDP socket (and empties its XSKMAP slot) only when
// its last file reference goes. What the next owner needs besides that fd
// is the packet memory, which is why the UMEM is a memfd mapped shared:
// XDP_UMEM_REG pins the pages of the registering mapping, and descriptors
// are offsets into them, so the successor must map the very same pages.

// umemSeals freeze the memfd's size: the kernel has pinned its pages and
// descriptors index them, so nobody may shrink or grow it.
const umemSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// newUMEMFile creates the sealed memfd behind a queue's UMEM.
func newUMEMFile(o Options) (int, error) {
	size := int64(o.NumFrames) * int64(o.FrameSize)
	fd, err := unix.MemfdCreate(fmt.Sprintf("xlb-umem-q%d", o.Queue), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("create umem memfd: %w", err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("size umem memfd to %d bytes: %w", size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, umemSeals); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("seal umem memfd: %w", err)
	}
	return fd, nil
}

// mapUMEM maps the whole memfd shared, populated, after checking that it
// is the size o says.
func mapUMEM(fd int, o Options) ([]byte, error) {
	size := o.NumFrames * o.FrameSize
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat umem memfd: %w", err)
	}
	if st.Size != int64(size) {
		return nil, fmt.Errorf("umem memfd holds %d bytes, want %d (%d frames of %d)", st.Size, size, o.NumFrames, o.FrameSize)
	}
	m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap umem of %d bytes: %w", size, err)
	}
	return m, nil
}

// UMEMFD returns the memfd that holds the UMEM, to hand to a successor
// together with FD.
func (s *Socket) UMEMFD() int { return s.umemFD }

// Options returns the options the socket was opened with, defaults
// applied: what Adopt needs to map it again.
func (s *Socket) Options() Options { return s.opts }

// Adopt maps a bound socket another process handed over: xskFD is the
// AF_XDP socket, umemFD the memfd of its UMEM, o the options it was opened
// with (Socket.Options of the previous owner). The Socket owns both fds
// from then on, also when Adopt fails (it closes them).
//
// Adopt only maps: the previous owner may keep driving the rings
// meanwhile. Rings must not be used until TakeOver, which the new owner
// calls once the previous one has stopped at a batch boundary.
// On kernels before 6.4 the error wraps ErrRemapUnsupported.
func Adopt(xskFD, umemFD int, o Options) (_ *Socket, err error) {
	s := &Socket{fd: xskFD, umemFD: umemFD, opts: o.withDefaults()}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("adopt xdp socket: %w", err)
	}
	o = s.opts
	if s.umem, err = mapUMEM(umemFD, o); err != nil {
		return nil, fmt.Errorf("adopt xdp socket of queue %d: %w", o.Queue, err)
	}
	if err := s.mapRings(); err != nil {
		return nil, fmt.Errorf("adopt xdp socket of queue %d: %w", o.Queue, err)
	}
	if s.zeroCopy, err = boundZeroCopy(xskFD); err != nil {
		return nil, fmt.Errorf("adopt xdp socket of queue %d: %w", o.Queue, err)
	}
	return s, nil
}

// TakeOver makes the caller the owner of an adopted socket's rings: it
// reads the shared ring indices and takes free, the previous owner's
// Frames.FreeList at the batch boundary where it stopped, as the
// allocator. The previous owner must not touch the rings afterwards. In
// zero-copy mode the caller kicks TX and fill once (the first worker Step
// does), since the driver may be waiting for a wake-up.
func (s *Socket) TakeOver(free []uint64) error {
	if err := s.r.adopt(s.opts, free); err != nil {
		return fmt.Errorf("take over xdp socket of queue %d: %w", s.opts.Queue, err)
	}
	return nil
}
