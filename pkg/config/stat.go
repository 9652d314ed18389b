package config

import (
	"os"
	"syscall"
	"time"
)

// fileStat is what a Loader compares to tell that a rule file did not
// change since it read it, without reading it: the device and inode (an
// editor that saves by rename makes a new one), the size, and the
// modification and status-change times (any write, rename or chmod sets
// ctime, which no tool can set back). Zero: unknown.
type fileStat struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64  // ns
	nlink        uint64 // other hard links: the directory watch cannot see writes through them
}

// changeMargin is how long after its last change a file's identity is
// trusted: a file changed twice within one tick of the kernel's coarse
// clock (a few ms) could keep its times and size; one last changed this
// long before it was read cannot change again unseen.
const changeMargin = time.Second

// statFile returns path's identity, zero when it cannot be read.
func statFile(path string) fileStat {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStat{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}
	}
	return fileStat{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), nlink: uint64(st.Nlink)}
}

func (s fileStat) valid() bool { return s != fileStat{} }

// trusted is s as a key for later loads: zero when the file changed less
// than changeMargin before now (the caller read it just after stat).
func (s fileStat) trusted() fileStat {
	if !s.valid() || time.Since(time.Unix(0, max(s.mtime, s.ctime))) < changeMargin {
		return fileStat{}
	}
	return s
}
