package ethtool

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ifreqData is struct ifreq with ifr_data set (40 bytes on 64-bit).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// ioctl runs SIOCETHTOOL on ifname with arg, a pointer to the command's
// struct (its first field the command). The kernel reads and writes the
// struct through ifr_data, so arg must stay alive until the call returns.
func ioctl[T value | channels](ifname string, arg *T) error {
	if len(ifname) >= unix.IFNAMSIZ {
		return fmt.Errorf("interface name %q too long", ifname)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("ethtool socket: %w", err)
	}
	defer unix.Close(fd)
	var ifr ifreqData
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(arg)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(arg)
	if errno != 0 {
		return errno
	}
	return nil
}
