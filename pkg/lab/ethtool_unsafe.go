package lab

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/netns"
)

// disableOffloads turns off TX checksum offload, scatter-gather, TSO and
// GSO on ifname in ns. With ethtool(8) installed it uses it (it knows every
// feature bit of the running kernel, such as tx-tcp-accecn-segmentation);
// without, the legacy ethtool ioctls do it, so a fresh machine needs no
// extra package (a TSO flavour the legacy commands do not name may stay
// on, but without scatter-gather and checksum offload it is never used).
func disableOffloads(ns *netns.NS, ifname string) error {
	if _, err := exec.LookPath("ethtool"); err == nil {
		if out, err := ns.Command("ethtool", "-K", ifname, "tx", "off", "sg", "off", "tso", "off", "gso", "off").CombinedOutput(); err != nil {
			return fmt.Errorf("disable offloads on %s (or set KeepOffloads): %w: %s", ifname, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	err := ns.Do(func() error {
		for _, cmd := range []uint32{ethtoolSTXCSUM, ethtoolSSG, ethtoolSTSO, ethtoolSGSO} {
			if err := ethtoolSet(ifname, cmd, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("disable offloads on %s (or set KeepOffloads): %w", ifname, err)
	}
	return nil
}

// Legacy ethtool commands (include/uapi/linux/ethtool.h); the kernel still
// maps them onto the netdev features, so the lab needs no ethtool binary.
const (
	ethtoolSTXCSUM = 0x17 // set TX checksum offload
	ethtoolSSG     = 0x19 // set scatter-gather: without it no TSO flavour stays on
	ethtoolSTSO    = 0x1f // set TCP segmentation offload
	ethtoolSGSO    = 0x24 // set generic segmentation offload
)

// ethtoolValue is struct ethtool_value.
type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with ifr_data set (40 bytes on 64-bit).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// ethtoolSet runs one legacy ethtool "set" command on ifname in the
// calling thread's network namespace.
func ethtoolSet(ifname string, cmd, value uint32) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("ethtool socket: %w", err)
	}
	defer unix.Close(fd)
	ev := ethtoolValue{cmd: cmd, data: value}
	var ifr ifreqData
	copy(ifr.name[:len(ifr.name)-1], ifname)
	ifr.data = unsafe.Pointer(&ev)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(&ev)
	if errno != 0 {
		return fmt.Errorf("ethtool command %#x on %s: %w", cmd, ifname, errno)
	}
	return nil
}
