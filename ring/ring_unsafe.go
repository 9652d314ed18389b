//go:build linux

package ring

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file holds every pointer conversion of the package: views of the
// ring memory the kernel maps into our address space, and the setsockopt/
// getsockopt calls whose arguments are structs. The mapped memory is not
// managed by the Go heap, so the pointers stay valid until munmap in
// Socket.Close; nothing here outlives that.

// Desc must be laid out exactly like struct xdp_desc (16 bytes), or the
// kernel and we disagree about every RX and TX slot. These two arrays fail
// to compile if the size is anything else.
var (
	_ [unsafe.Sizeof(Desc{}) - 16]struct{}
	_ [16 - unsafe.Sizeof(Desc{})]struct{}
	_ [unsafe.Sizeof(unix.XDPDesc{}) - unsafe.Sizeof(Desc{})]struct{}
)

// u32At returns the 32-bit word at off in mapped ring memory as an atomic.
// atomic.Uint32 has the size and alignment of uint32; the kernel aligns
// producer, consumer and flags to at least 4 bytes (struct xdp_ring).
func u32At(mem []byte, off uint64) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&mem[off]))
}

// descsAt returns n descriptors at off in mapped ring memory.
func descsAt(mem []byte, off uint64, n int) []Desc {
	return unsafe.Slice((*Desc)(unsafe.Pointer(&mem[off])), n)
}

// addrsAt returns n 64-bit addresses at off in mapped ring memory.
func addrsAt(mem []byte, off uint64, n int) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(&mem[off])), n)
}

// registerUMEM tells the kernel where the UMEM is (XDP_UMEM_REG).
func registerUMEM(fd int, mem []byte, frameSize, headroom int) error {
	reg := unix.XDPUmemReg{
		Addr:     uint64(uintptr(unsafe.Pointer(&mem[0]))),
		Len:      uint64(len(mem)),
		Size:     uint32(frameSize),
		Headroom: uint32(headroom),
	}
	_, _, errno := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_UMEM_REG,
		uintptr(unsafe.Pointer(&reg)), unsafe.Sizeof(reg), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// getsockoptStruct reads a struct-valued SOL_XDP option into *v.
func getsockoptStruct[T any](fd, opt int, v *T) error {
	size := uint32(unsafe.Sizeof(*v))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt),
		uintptr(unsafe.Pointer(v)), uintptr(unsafe.Pointer(&size)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
