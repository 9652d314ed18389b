package conntrack

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Huge pages for the arenas (see doc.go "Huge pages"). A memfd is shmem:
// the kernel backs it with 2 MiB pages only where shmem_enabled allows it
// (advise: for mappings advised MADV_HUGEPAGE; always, within_size,
// force) and only for pages allocated after the advice, so an arena is
// mapped without MAP_POPULATE, advised, then populated. An arena a
// predecessor populated keeps the pages it got: a successor maps them
// the same way, and a huge page in the file is mapped by one PMD however
// the successor's kernel setting reads.

// ShmemTHPPath is the kernel's setting for transparent huge pages in
// shmem (memfds included).
const ShmemTHPPath = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"

// mapHuge maps size bytes of the memfd fd shared, read-write, advised for
// huge pages and populated. Without THP (kernel setting or build) the
// advice fails or is ignored and the arena has 4 KiB pages, which is not
// an error.
func mapHuge(fd, size int) ([]byte, error) {
	m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(m, unix.MADV_HUGEPAGE) // EINVAL without CONFIG_TRANSPARENT_HUGEPAGE
	switch err := unix.Madvise(m, unix.MADV_POPULATE_WRITE); {
	case err == nil:
	case errors.Is(err, unix.EINVAL):
		// Before Linux 5.14: fault every page in by reading it (shmem
		// allocates on a read fault, and the mapping is writable).
		var sink byte
		for off := 0; off < len(m); off += os.Getpagesize() {
			sink ^= *(*byte)(unsafe.Pointer(&m[off]))
		}
		populateSink = sink
	default:
		unix.Munmap(m)
		return nil, fmt.Errorf("populate: %w", err)
	}
	return m, nil
}

var populateSink byte

// HugeBytes reports how many bytes of the arena's mapping are mapped by
// huge pages (ShmemPmdMapped + FilePmdMapped of its line in
// /proc/self/smaps). It reads the file: not for the packet path.
func (a *Arena) HugeBytes() (int64, error) {
	if a.mem == nil {
		return 0, errors.New("conntrack arena: closed")
	}
	return smapsHugeBytes(uintptr(unsafe.Pointer(&a.mem[0])))
}

// smapsHugeBytes sums the PMD-mapped kB of the mapping starting at addr.
func smapsHugeBytes(addr uintptr) (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	prefix := strconv.FormatUint(uint64(addr), 16) + "-"
	in, found := false, false
	var kb int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if k, _, ok := strings.Cut(line, ":"); !ok || strings.Contains(k, " ") {
			// A mapping's first line ("start-end perms ..."), not a field.
			if in {
				break
			}
			in = strings.HasPrefix(line, prefix)
			found = found || in
			continue
		}
		if !in {
			continue
		}
		name, rest, _ := strings.Cut(line, ":")
		if name != "ShmemPmdMapped" && name != "FilePmdMapped" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("smaps %s: %w", name, err)
		}
		kb += n
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("smaps: no mapping at %#x", addr)
	}
	return kb << 10, nil
}

// ShmemTHP returns the kernel's shmem THP mode (the bracketed word of
// ShmemTHPPath: always, within_size, advise, never, deny, force), "" when
// the kernel has no THP.
func ShmemTHP() string {
	b, err := os.ReadFile(ShmemTHPPath)
	if err != nil {
		return ""
	}
	return selectedMode(string(b))
}

func selectedMode(s string) string {
	_, rest, ok := strings.Cut(s, "[")
	if !ok {
		return strings.TrimSpace(s)
	}
	mode, _, _ := strings.Cut(rest, "]")
	return mode
}

// ShmemTHPAdvised reports whether an arena mapped now gets huge pages
// (the mode honours MADV_HUGEPAGE).
func ShmemTHPAdvised(mode string) bool {
	switch mode {
	case "advise", "always", "within_size", "force":
		return true
	}
	return false
}

// Bytes is the size of the arena's mapping (header page and buckets).
func (a *Arena) Bytes() int64 { return int64(len(a.mem)) }
