package xsk

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// liftMemlock lifts RLIMIT_MEMLOCK before the program's maps are created:
// kernels before 5.11 charge BPF memory to it, later ones to the memory
// cgroup. It runs when a program is loaded, not at package init as in
// cilium/ebpf's rlimit package, whose init probes the kernel by creating
// a BPF map under a zero limit in every process that links it: every
// `xlb status` and `xlb lookup` paid that system call and 0.75 ms of its
// start.
func liftMemlock() error {
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil && kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 5, 11) {
		return nil
	}
	inf := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &inf); err != nil {
		return fmt.Errorf("remove memlock limit (kernels before 5.11 charge BPF maps to it): %w", err)
	}
	return nil
}

// kernelAtLeast reports whether a kernel release ("6.18.44-fc", "5.10.0-28-amd64")
// is major.minor or later; a release it cannot read is not.
func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false
	}
	return maj > major || (maj == major && min >= minor)
}
