package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Arenas in memfds: a Table's or a Shared table's buckets can live in a
// sealed memfd mapped shared instead of the Go heap, so that the memory
// outlives the process that fills it: a successor maps the same pages
// (over a hand-over's SCM_RIGHTS, or from systemd's fd store after a
// crash) and finds every entry where it was. Both bucket types hold no
// pointers, so nothing in the arena refers to the process that wrote it.
//
// The memfd starts with a one-page header, then the buckets:
//
//	off  size  field
//	  0     8  magic "xlbctar1"
//	  8     4  kind (1 per-queue Table, 2 Shared)
//	 12     4  layout: CRC-32 of the bucket type's shape (arenaLayout)
//	 16     4  bucket size in bytes
//	 20     4  reserved, 0
//	 24     8  buckets
//	 32     8  max entries asked for
//	 40     8  bucket-hash seed
//	 48     8  clock base: CLOCK_MONOTONIC ns of conntrack time 0
//	 56     4  interface index
//	 60     4  queue (-1 for a Shared table)
//	 64     4  clean: 1 when the owner stopped between two batches
//	 68     4  reserved, 0
//	 72     8  slots in use, valid when clean
//	 80     4  CRC-32C of bytes 0-79
//
// A successor that finds another layout cannot read the buckets and
// starts that table cold (the caller logs why). Clean is set by the owner
// once its worker has stopped (MarkStopped) and cleared by the next owner
// (Resume), so a header that is not clean belongs to an owner that died:
// the next one recounts and validates the entries before it uses them.

const (
	arenaMagic      = "xlbctar1"
	arenaHeaderSize = 4096
	arenaHeaderLen  = 80 // bytes covered by the checksum
)

// ArenaKind says which table an arena holds.
type ArenaKind uint32

const (
	ArenaTable  ArenaKind = 1
	ArenaShared ArenaKind = 2
)

// ArenaInfo is what an arena's header says about it, besides its layout.
type ArenaInfo struct {
	Kind       ArenaKind
	Buckets    int
	MaxEntries int
	Seed       uint64
	ClockBase  int64 // CLOCK_MONOTONIC ns of conntrack time 0 (MonotonicClock.Base)
	Ifindex    int
	Queue      int // -1 for a Shared table
	Clean      bool
	Used       int // slots in use, when Clean
}

// arenaLayoutRevision changes when a field keeps its shape but changes
// its meaning; shapes are compared by arenaLayout itself. A variable, so
// a test can link a build of another revision (-ldflags -X) and drive an
// upgrade across a layout change.
var arenaLayoutRevision = "1"

// arenaLayout is a CRC-32 of the shape of bucket type B: every field's
// name, offset, size and kind, recursively, and the revision.
func arenaLayout[B any]() uint32 {
	var sb strings.Builder
	fmt.Fprintf(&sb, "rev %s;", arenaLayoutRevision)
	describeType(&sb, reflect.TypeFor[B]())
	return crc32.ChecksumIEEE([]byte(sb.String()))
}

func describeType(sb *strings.Builder, t reflect.Type) {
	fmt.Fprintf(sb, "%s/%d{", t.Kind(), t.Size())
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			fmt.Fprintf(sb, "%s@%d:", f.Name, f.Offset)
			describeType(sb, f.Type)
		}
	case reflect.Array:
		fmt.Fprintf(sb, "%d×", t.Len())
		describeType(sb, t.Elem())
	}
	sb.WriteString("}")
}

// Arena is the memfd-backed memory of one table.
type Arena struct {
	fd  int
	mem []byte // header page, then the buckets
}

// FD returns the memfd, to hand to a successor; it stays the Arena's.
func (a *Arena) FD() int { return a.fd }

// Info decodes the header.
func (a *Arena) Info() ArenaInfo {
	h := a.mem[:arenaHeaderLen]
	le := binary.LittleEndian
	return ArenaInfo{
		Kind:       ArenaKind(le.Uint32(h[8:])),
		Buckets:    int(le.Uint64(h[24:])),
		MaxEntries: int(le.Uint64(h[32:])),
		Seed:       le.Uint64(h[40:]),
		ClockBase:  int64(le.Uint64(h[48:])),
		Ifindex:    int(int32(le.Uint32(h[56:]))),
		Queue:      int(int32(le.Uint32(h[60:]))),
		Clean:      le.Uint32(h[64:]) == 1,
		Used:       int(le.Uint64(h[72:])),
	}
}

// writeHeader encodes info (with layout and bucket size) and its checksum.
func (a *Arena) writeHeader(info ArenaInfo, layout, bucketSize uint32) {
	h := a.mem[:arenaHeaderSize]
	clear(h)
	le := binary.LittleEndian
	copy(h, arenaMagic)
	le.PutUint32(h[8:], uint32(info.Kind))
	le.PutUint32(h[12:], layout)
	le.PutUint32(h[16:], bucketSize)
	le.PutUint64(h[24:], uint64(info.Buckets))
	le.PutUint64(h[32:], uint64(info.MaxEntries))
	le.PutUint64(h[40:], info.Seed)
	le.PutUint64(h[48:], uint64(info.ClockBase))
	le.PutUint32(h[56:], uint32(int32(info.Ifindex)))
	le.PutUint32(h[60:], uint32(int32(info.Queue)))
	if info.Clean {
		le.PutUint32(h[64:], 1)
	}
	le.PutUint64(h[72:], uint64(info.Used))
	le.PutUint32(h[arenaHeaderLen:], crc32.Checksum(h[:arenaHeaderLen], crc32.MakeTable(crc32.Castagnoli)))
}

// setClean rewrites the clean flag and the count of slots in use.
func (a *Arena) setClean(clean bool, used int) {
	info := a.Info()
	info.Clean, info.Used = clean, used
	le := binary.LittleEndian
	a.writeHeader(info, le.Uint32(a.mem[12:]), le.Uint32(a.mem[16:]))
}

// Close unmaps the arena and closes the memfd. The tables over it must
// not be used afterwards; a successor's copy of the memfd keeps it.
func (a *Arena) Close() error {
	var errs []error
	if a.mem != nil {
		errs = append(errs, unix.Munmap(a.mem))
		a.mem = nil
	}
	if a.fd >= 0 {
		errs = append(errs, unix.Close(a.fd))
		a.fd = -1
	}
	return errors.Join(errs...)
}

// createArena makes a memfd holding the header for info and nb buckets of
// B, maps it shared, advised for huge pages and populated (mapHuge: no
// page fault lands on the packet path), and returns the buckets over it.
func createArena[B any](name string, info ArenaInfo) (*Arena, []B, error) {
	size := arenaHeaderSize + int64(info.Buckets)*int64(unsafe.Sizeof(*new(B)))
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("conntrack arena memfd: %w", err)
	}
	a := &Arena{fd: fd}
	if err := unix.Ftruncate(fd, size); err != nil {
		a.Close()
		return nil, nil, fmt.Errorf("conntrack arena of %d bytes: %w", size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		a.Close()
		return nil, nil, fmt.Errorf("seal conntrack arena: %w", err)
	}
	buckets, err := a.mapBuckets(size, info.Buckets, unsafe.Sizeof(*new(B)))
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	a.writeHeader(info, arenaLayout[B](), uint32(unsafe.Sizeof(*new(B))))
	return a, unsafe.Slice((*B)(buckets), info.Buckets), nil
}

func (a *Arena) mapBuckets(size int64, nb int, bucketSize uintptr) (unsafe.Pointer, error) {
	m, err := mapHuge(a.fd, int(size))
	if err != nil {
		return nil, fmt.Errorf("map conntrack arena of %d bytes: %w", size, err)
	}
	a.mem = m
	if nb == 0 {
		return nil, errors.New("conntrack arena without buckets")
	}
	return unsafe.Pointer(&m[arenaHeaderSize]), nil
}

// ErrArenaLayout says an arena was written by a build whose buckets have
// another layout; its entries cannot be read.
var ErrArenaLayout = errors.New("conntrack arena has another layout")

// openArena maps the arena in fd (which it owns from then on, also on
// error) after checking that it holds kind with B's layout.
func openArena[B any](fd int, kind ArenaKind) (*Arena, []B, error) {
	a := &Arena{fd: fd}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		a.Close()
		return nil, nil, fmt.Errorf("conntrack arena: %w", err)
	}
	if st.Size < arenaHeaderSize {
		a.Close()
		return nil, nil, fmt.Errorf("conntrack arena: %d bytes, less than its header", st.Size)
	}
	hdr, err := unix.Mmap(fd, 0, arenaHeaderSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		a.Close()
		return nil, nil, fmt.Errorf("conntrack arena header: %w", err)
	}
	info, layout, bsize, err := checkHeader(hdr)
	unix.Munmap(hdr)
	switch {
	case err != nil:
	case info.Kind != kind:
		err = fmt.Errorf("conntrack arena holds kind %d, want %d", info.Kind, kind)
	case layout != arenaLayout[B]() || uintptr(bsize) != unsafe.Sizeof(*new(B)):
		err = fmt.Errorf("%w (%d-byte buckets, layout %08x; this build: %d, %08x)", ErrArenaLayout, bsize, layout, unsafe.Sizeof(*new(B)), arenaLayout[B]())
	case st.Size != arenaHeaderSize+int64(info.Buckets)*int64(bsize):
		err = fmt.Errorf("conntrack arena: %d bytes for %d buckets of %d", st.Size, info.Buckets, bsize)
	}
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	p, err := a.mapBuckets(st.Size, info.Buckets, uintptr(bsize))
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, unsafe.Slice((*B)(p), info.Buckets), nil
}

func checkHeader(h []byte) (ArenaInfo, uint32, uint32, error) {
	if string(h[:8]) != arenaMagic {
		return ArenaInfo{}, 0, 0, fmt.Errorf("conntrack arena: bad magic %q", h[:8])
	}
	le := binary.LittleEndian
	if got, want := le.Uint32(h[arenaHeaderLen:]), crc32.Checksum(h[:arenaHeaderLen], crc32.MakeTable(crc32.Castagnoli)); got != want {
		return ArenaInfo{}, 0, 0, fmt.Errorf("conntrack arena: header checksum %08x, want %08x", got, want)
	}
	a := Arena{mem: h}
	return a.Info(), le.Uint32(h[12:]), le.Uint32(h[16:]), nil
}

// NewInArena is New with the arena in a memfd (see Arena); info gives the
// clock base, interface and queue recorded in its header.
func NewInArena(maxEntries int, seed uint64, info ArenaInfo) (*Table, error) {
	if maxEntries < 1 || maxEntries > maxTableEntries {
		return nil, fmt.Errorf("new conntrack table: %w: %d (want 1..%d)", ErrMaxEntries, maxEntries, maxTableEntries)
	}
	info.Kind, info.MaxEntries, info.Seed = ArenaTable, maxEntries, seed
	info.Buckets = (maxEntries + Ways - 1) / Ways
	info.Clean, info.Used = false, 0
	a, buckets, err := createArena[bucket](fmt.Sprintf("xlb-ct-q%d", info.Queue), info)
	if err != nil {
		return nil, err
	}
	t := newTable(buckets, seed)
	t.arena = a
	return t, nil
}

// AdoptTable maps the arena of another process's Table (fd, which it owns
// from then on): the entries, seed and geometry it holds. The table is
// not to be used before Resume, which the new owner calls once the
// previous one stopped (MarkStopped) or died.
func AdoptTable(fd int) (*Table, error) {
	a, buckets, err := openArena[bucket](fd, ArenaTable)
	if err != nil {
		return nil, err
	}
	t := newTable(buckets, a.Info().Seed)
	t.arena = a
	return t, nil
}

// Arena returns the table's arena, nil for a table on the Go heap.
func (t *Table) Arena() *Arena { return t.arena }

// MarkStopped records in the arena's header that the owner stopped
// between two batches, with the number of slots in use, so the next owner
// trusts the entries without recounting. The worker must have stopped.
func (t *Table) MarkStopped() {
	if t.arena != nil {
		t.arena.setClean(true, t.n)
	}
}

// Resume makes the caller the owner of an adopted table. After a clean
// stop the count of slots in use comes from the header; otherwise (the
// previous owner died mid-batch) every bucket is recounted. It reports
// whether the stop was clean. The header is marked in use again.
func (t *Table) Resume() bool {
	info := t.arena.Info()
	if info.Clean {
		t.n = info.Used
	} else {
		t.n = 0
		for i := range t.buckets {
			_, free := t.buckets[i].empties()
			t.n += Ways - free
		}
	}
	t.published.Store(int64(t.n))
	t.arena.setClean(false, 0)
	return info.Clean
}

// Scrub removes every entry for which keep returns false (entries naming
// a rule or backend slot the carried registry does not know, after a
// crash) and returns how many it removed. Owner goroutine only, before
// the worker runs.
func (t *Table) Scrub(keep func(rule uint16, backend uint32) bool) int {
	removed := 0
	for bi := range t.buckets {
		b := &t.buckets[bi]
		for i := range Ways {
			if b.tags[i] != 0 && !keep(b.slots[i].rule, b.slots[i].backend) {
				b.clear(i)
				removed++
			}
		}
	}
	t.n -= removed
	t.published.Store(int64(t.n))
	return removed
}

// NewSharedInArena is NewShared with the arena in a memfd (see Arena).
func NewSharedInArena(maxEntries int, seed uint64, info ArenaInfo) (*Shared, error) {
	if maxEntries < 1 || maxEntries > maxTableEntries {
		return nil, fmt.Errorf("new shared conntrack table: %w: %d (want 1..%d)", ErrMaxEntries, maxEntries, maxTableEntries)
	}
	info.Kind, info.MaxEntries, info.Seed, info.Queue = ArenaShared, maxEntries, seed, -1
	info.Buckets = (maxEntries + SharedWays - 1) / SharedWays
	a, buckets, err := createArena[sharedBucket]("xlb-ct-shared", info)
	if err != nil {
		return nil, err
	}
	s := newShared(buckets, seed)
	s.arena = a
	return s, nil
}

// AdoptShared maps the arena of another process's Shared table (fd, which
// it owns from then on). Unlike a Table it is usable at once: every access
// is atomic and the seqlock protects readers, so the previous owner's
// workers may still be running. Repair is for an arena whose owner died.
func AdoptShared(fd int) (*Shared, error) {
	a, buckets, err := openArena[sharedBucket](fd, ArenaShared)
	if err != nil {
		return nil, err
	}
	s := newShared(buckets, a.Info().Seed)
	s.arena = a
	return s, nil
}

// Arena returns the table's arena, nil for a table on the Go heap.
func (s *Shared) Arena() *Arena { return s.arena }

// Repair makes a Shared arena whose writer died usable again: a bucket
// left locked (odd sequence) is unlocked, and entries for which keep
// returns false are removed. It returns how many entries it removed. No
// other process may be using the table.
func (s *Shared) Repair(keep func(rule uint16, backend uint32) bool) int {
	removed := 0
	for bi := range s.buckets {
		b := &s.buckets[bi]
		seq := b.seq.Load()
		for i := range SharedWays {
			if b.tag(i) == 0 {
				continue
			}
			_, rule := unpackKey(&b.slots[i])
			if !keep(rule, b.value(i).Backend) {
				b.setTag(i, 0)
				removed++
			}
		}
		b.seq.Store(seq&^1 + 2)
	}
	return removed
}
