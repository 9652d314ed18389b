package procfd

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Holders returns, in pid order, the processes with a descriptor whose
// link (its target as /proc/PID/fd shows it: "socket:[N]",
// "anon_inode:bpf-prog", a path) match accepts; match also gets the pid
// and the descriptor's number, to read its fdinfo (InfoHas).
func Holders(match func(pid int, fd, target string) bool) []int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", p.Name(), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join(dir, fd.Name()))
			if err == nil && match(pid, fd.Name(), target) {
				pids = append(pids, pid)
				break
			}
		}
	}
	slices.Sort(pids)
	return pids
}

// InfoHas reports whether descriptor fd of pid has line among the lines
// of its /proc/PID/fdinfo (e.g. "prog_id:\t42").
func InfoHas(pid int, fd, line string) bool {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "fdinfo", fd))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() == line {
			return true
		}
	}
	return false
}

// Comm is the command name of pid ("" when gone).
func Comm(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return strings.TrimSpace(string(b))
}
