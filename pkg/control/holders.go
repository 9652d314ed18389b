package control

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/procfd"
)

// socketHolders returns the processes that hold the listening unix socket
// bound at path, found by its inode in /proc/net/unix and the holders'
// descriptors in /proc/PID/fd. The kernel's peer credentials name the
// process that created the listener, which after a hand-over (xlb restart
// passes its sockets to its successor) has exited. Empty when the socket
// is not in this network namespace's table or no holder's descriptors can
// be read (not root).
func socketHolders(path string) []int {
	names := []string{path}
	if abs, err := filepath.Abs(path); err == nil && abs != path {
		names = append(names, abs)
	}
	inodes := listeningInodes(names)
	if len(inodes) == 0 {
		return nil
	}
	return procfd.Holders(func(_ int, _, target string) bool { return inodes[target] })
}

// listeningInodes reads /proc/net/unix for the listening sockets bound at
// one of names, as the links of their descriptors read ("socket:[N]").
func listeningInodes(names []string) map[string]bool {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return nil
	}
	defer f.Close()
	const acceptConn = 0x10000 // __SO_ACCEPTCON: the socket listens
	inodes := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// Num RefCount Protocol Flags Type St Inode Path
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || !slices.Contains(names, fields[7]) {
			continue
		}
		if flags, err := strconv.ParseUint(fields[3], 16, 32); err != nil || flags&acceptConn == 0 {
			continue
		}
		inodes[fmt.Sprintf("socket:[%s]", fields[6])] = true
	}
	return inodes
}

// servingWho names who serves the socket at path for an error message: its
// holders when they can be found, else the process that made its listener
// (creator, 0 when unknown) and whether that one has exited.
func servingWho(path string, creator int32) string {
	switch pids := socketHolders(path); {
	case len(pids) == 1:
		return fmt.Sprintf("another process (pid %d)", pids[0])
	case len(pids) > 1:
		s := make([]string, len(pids))
		for i, p := range pids {
			s[i] = strconv.Itoa(p)
		}
		return fmt.Sprintf("other processes (pids %s)", strings.Join(s, ", "))
	case creator <= 0:
		return "another process"
	case unix.Kill(int(creator), 0) == unix.ESRCH:
		return fmt.Sprintf("another process (its listener was made by pid %d, which has exited: handed over by a restart?)", creator)
	}
	return fmt.Sprintf("another process (pid %d)", creator)
}
