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
	n, err := HugeBytesOf([]*Arena{a})
	if err != nil {
		return 0, err
	}
	return n[0], nil
}

// HugeBytesOf is HugeBytes of every arena from one read of
// /proc/self/smaps: the kernel walks the page tables of every mapping it
// prints, so one read for all arenas costs one walk (several reads would
// walk the mappings before each arena again).
func HugeBytesOf(arenas []*Arena) ([]int64, error) {
	at := make(map[string]int, len(arenas)) // "start-" of each mapping → index
	for i, a := range arenas {
		if a == nil || a.mem == nil {
			return nil, errors.New("conntrack arena: closed")
		}
		at[strconv.FormatUint(uint64(uintptr(unsafe.Pointer(&a.mem[0]))), 16)+"-"] = i
	}
	kb, found, err := smapsHugeKB(at, len(arenas))
	if err != nil {
		return nil, err
	}
	for i, ok := range found {
		if !ok {
			return nil, fmt.Errorf("smaps: no mapping at %#x", uintptr(unsafe.Pointer(&arenas[i].mem[0])))
		}
		kb[i] <<= 10
	}
	return kb, nil
}

// smapsHugeKB sums the PMD-mapped kB of the mappings whose first line
// starts with a prefix of at, by the prefix's index.
func smapsHugeKB(at map[string]int, n int) (kb []int64, found []bool, err error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	kb, found = make([]int64, n), make([]bool, n)
	left, cur := len(at), -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if k, _, ok := strings.Cut(line, ":"); !ok || strings.Contains(k, " ") {
			// A mapping's first line ("start-end perms ..."), not a field.
			if cur >= 0 {
				if left--; left == 0 {
					break
				}
			}
			cur = -1
			if start, _, ok := strings.Cut(line, "-"); ok {
				if i, ok := at[start+"-"]; ok {
					cur, found[i] = i, true
				}
			}
			continue
		}
		if cur < 0 {
			continue
		}
		name, rest, _ := strings.Cut(line, ":")
		if name != "ShmemPmdMapped" && name != "FilePmdMapped" {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("smaps %s: %w", name, err)
		}
		kb[cur] += v
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return kb, found, nil
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
