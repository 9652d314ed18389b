package health

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The connector's system calls never block: a non-blocking connect, close
// of a socket without linger, and epoll_pwait with a zero timeout. They
// are made raw, without the runtime's system-call bookkeeping, which also
// wakes the runtime's monitor thread (sysmon) whenever the process comes
// out of idleness: with probes in rounds and the process idle between
// them, that is a wake-up per round and then a monitor polling every 20 µs
// through the round, which on a virtual machine cost about as much as the
// probes (bench/README.md). Socket and epoll_ctl are raw in x/sys already.

// rawConnect starts connecting the non-blocking socket fd to addr.
func rawConnect(fd int, addr netip.AddrPort) error {
	var ptr unsafe.Pointer
	var size uintptr
	if a := addr.Addr(); a.Is4() {
		sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.As4()}
		sa.Port = htons(addr.Port())
		ptr, size = unsafe.Pointer(&sa), unsafe.Sizeof(sa)
		_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(ptr), size)
		return errnoErr(e)
	}
	sa := unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: addr.Addr().As16()}
	sa.Port = htons(addr.Port())
	ptr, size = unsafe.Pointer(&sa), unsafe.Sizeof(sa)
	_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(ptr), size)
	return errnoErr(e)
}

// rawClose closes fd.
func rawClose(fd int) {
	unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}

// rawSetsockopt sets a socket option from the value at ptr.
func rawSetsockopt(fd, level, name int, ptr unsafe.Pointer, size uintptr) error {
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(name), uintptr(ptr), size, 0)
	return errnoErr(e)
}

// rawEpollPoll takes what epfd has ready, without waiting.
func rawEpollPoll(epfd int, events []unix.EpollEvent) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// TCP states as TCP_INFO reports them (include/net/tcp_states.h).
const (
	tcpSynSent = 2
	tcpSynRecv = 3
	tcpClose   = 7
)

// rawTCPInfo is what the kernel knows of the TCP socket fd: its state,
// and the round-trip time (µs) it measured.
func rawTCPInfo(fd int) (unix.TCPInfo, error) {
	var info unix.TCPInfo
	size := uint32(unsafe.Sizeof(info))
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, unix.TCP_INFO, uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&size)), 0)
	return info, errnoErr(e)
}

// htons puts a port in network byte order in the sockaddr's field, whose
// bytes are read as they lie in memory.
func htons(p uint16) uint16 {
	b := [2]byte{byte(p >> 8), byte(p)}
	return *(*uint16)(unsafe.Pointer(&b))
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}
