package config

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// dirWatch tells a Loader which entries of rules_dir changed since it last
// asked (inotify), so that a load need not stat every rule file. Events
// are queued by the kernel in the call that makes the change, before it
// returns, so a change made before a load began is in the queue when the
// load drains it; the watch is read only by the load (no goroutine).
type dirWatch struct {
	fd  int
	dir string
	id  dirID // the directory's identity when the watch was set
	buf []byte
	// cleanup closes fd when a Loader is dropped without Close.
	cleanup runtime.Cleanup
}

// dirID is a directory's device and inode: a directory replaced by
// another (renamed over, a symlink on its path repointed, a mount) has
// another, and its watch no longer describes it.
type dirID struct{ dev, ino uint64 }

// watchMask: every change to an entry's name, bytes or status (a chmod
// makes a file unreadable; a rename over one is a new file), and the
// directory's own end.
const watchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// watchLost: the watch cannot tell what changed (the queue overflowed and
// dropped events, or the directory went away).
const watchLost = unix.IN_Q_OVERFLOW | unix.IN_IGNORED | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_UNMOUNT

func identity(dir string) (dirID, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return dirID{}, err
	}
	return dirID{uint64(st.Dev), st.Ino}, nil
}

// remoteFS: file systems whose files other machines (or a user-space
// server) change without the local kernel's knowledge, so inotify never
// hears of it: NFS, SMB/CIFS, FUSE, 9p, Ceph, AFS, GFS2, OCFS2, Lustre
// (statfs magic numbers). A rules_dir there is scanned every load.
var remoteFS = map[int64]string{
	0x6969: "nfs", 0x517b: "smb", 0xff534d42: "cifs", 0xfe534d42: "smb2", 0x65735546: "fuse",
	0x01021997: "9p", 0x00c36400: "ceph", 0x5346414f: "afs", 0x01161970: "gfs2", 0x7461636f: "ocfs2",
	0x0bd00bd0: "lustre",
}

// watchDir sets a watch on dir. The directory's identity is taken before
// and after: a directory replaced meanwhile fails the watch (the caller
// scans, as without one). A directory on a remote file system is not
// watched (remoteFS).
func watchDir(dir string) (*dirWatch, error) {
	before, err := identity(dir)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	if name, remote := remoteFS[int64(fs.Type)]; remote {
		return nil, fmt.Errorf("watch %s: on %s, whose changes from elsewhere inotify does not see", dir, name)
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, watchMask); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	if after, err := identity(dir); err != nil || after != before {
		unix.Close(fd)
		return nil, fmt.Errorf("watch %s: replaced while the watch was set", dir)
	}
	w := &dirWatch{fd: fd, dir: dir, id: before, buf: make([]byte, 64<<10)}
	w.cleanup = runtime.AddCleanup(w, func(fd int) { unix.Close(fd) }, fd)
	return w, nil
}

// changes drains the events queued since the last call into names (the
// entries created, written, renamed, removed or whose status changed) and
// reports lost when the watch cannot tell: the queue overflowed, the
// directory was moved, removed or unmounted, or the path now names
// another directory. A lost watch is to be closed and the directory
// scanned.
func (w *dirWatch) changes(names map[string]bool) (lost bool) {
	for {
		n, err := unix.Read(w.fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil || n <= 0 {
			return true
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			mask := binary.NativeEndian.Uint32(w.buf[off+4:])
			size := int(binary.NativeEndian.Uint32(w.buf[off+12:]))
			name := w.buf[off+unix.SizeofInotifyEvent : min(n, off+unix.SizeofInotifyEvent+size)]
			off += unix.SizeofInotifyEvent + size
			if mask&watchLost != 0 {
				lost = true
				continue
			}
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
			if len(name) > 0 {
				names[string(name)] = true
			}
		}
	}
	if id, err := identity(w.dir); err != nil || id != w.id {
		lost = true
	}
	return lost
}

func (w *dirWatch) close() {
	if w != nil {
		w.cleanup.Stop()
		unix.Close(w.fd)
	}
}
