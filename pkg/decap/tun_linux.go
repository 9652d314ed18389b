package decap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openTUNQueue opens one queue of the multi-queue TUN device name
// (IFF_TUN|IFF_NO_PI|IFF_MULTI_QUEUE), creating the device on the first
// call. The device lives in the network namespace of the calling thread and
// disappears when its last queue is closed. The file is non-blocking and
// registered with the Go poller, so Close unblocks a pending Write.
// first makes the call fail if the device exists already (IFF_TUN_EXCL):
// a second decapsulator in the same namespace would otherwise attach to it,
// and every packet its raw sockets also receive would be delivered twice.
func openTUNQueue(name string, first bool) (*os.File, string, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, "", fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("tun name %q: %w", name, err)
	}
	flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_MULTI_QUEUE)
	if first {
		flags |= unix.IFF_TUN_EXCL
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("create tun %s: %w", name, err)
	}
	actual := ifr.Name()
	return os.NewFile(uintptr(fd), "tun:"+actual), actual, nil
}

// linkUp sets the MTU of the interface name and brings it up, through the
// ioctls on a throw-away socket of the calling thread's namespace.
func linkUp(name string, mtu int) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring %s up: socket: %w", name, err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fmt.Errorf("bring %s up: %w", name, err)
	}
	if mtu > 0 {
		ifr.SetUint32(uint32(mtu))
		if err := unix.IoctlIfreq(s, unix.SIOCSIFMTU, ifr); err != nil {
			return fmt.Errorf("set mtu %d on %s: %w", mtu, name, err)
		}
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get flags of %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring %s up: %w", name, err)
	}
	return nil
}

// rawSocket opens a non-blocking raw IP socket of the given family and
// protocol and wraps it in an *os.File registered with the Go poller, so
// Read parks the goroutine instead of a thread and Close unblocks it.
func rawSocket(family, proto, rcvbuf int) (*os.File, error) {
	fd, err := unix.Socket(family, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, err
	}
	setRcvbuf(fd, rcvbuf)
	return os.NewFile(uintptr(fd), fmt.Sprintf("raw%d:%d", familyVersion(family), proto)), nil
}

// setRcvbuf raises the receive buffer; SO_RCVBUFFORCE (root) ignores
// rmem_max, SO_RCVBUF is the best effort without it. Failure is not fatal:
// a small buffer only drops more under bursts, and those drops are the
// kernel's to count.
func setRcvbuf(fd, n int) {
	if n <= 0 {
		return
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, n)
	}
}

func familyVersion(family int) int {
	if family == unix.AF_INET6 {
		return 6
	}
	return 4
}

// writeSysctl writes value to /proc/sys/<path>. /proc/sys/net resolves to
// the network namespace of the calling thread.
func writeSysctl(path, value string) error {
	if err := os.WriteFile("/proc/sys/"+path, []byte(value), 0); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", path, value, err)
	}
	return nil
}
