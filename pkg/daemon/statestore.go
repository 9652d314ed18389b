package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/sdnotify"
)

// The state document in systemd's fd store, in parts
// (docs/design.md#the-state-document-in-parts): the head and the
// stateBuckets buckets (docparts.go), each a sealed memfd named after the
// generation that wrote it (state-h-<gen>, state-b<NN>-<gen>), and a
// manifest (state-m-<gen>)
// naming the parts that make up the document of generation gen. A
// publication stores new memfds for the parts that changed only, then
// the manifest, then removes the manifest and the parts it replaced: a
// crash between any two of these messages leaves a complete document in
// the store, the one before or the one after, and a restore reads the
// newest manifest whose parts are all there (readStoredDoc).

// Part indices in storedParts and in a manifest.
const (
	partHead    = 0
	partBuckets = 1
	stateParts  = partBuckets + stateBuckets
)

// stateManifestVersion is the version of the manifest's format.
const stateManifestVersion = 1

// stateManifest names the parts of one generation's document, in order:
// the head, then the buckets.
type stateManifest struct {
	Version int            `json:"version"`
	Gen     uint64         `json:"gen"`
	Parts   []manifestPart `json:"parts"`
}

type manifestPart struct {
	Name string `json:"name"`
	// Sizes are the lengths of the part's sections, in order: the head
	// has one; a bucket five (rule slots, backend slots, rules, verdicts,
	// next hops: docSections).
	Sizes []int `json:"sizes"`
}

// storedParts is what the fd store holds of the state document (control
// goroutine).
type storedParts struct {
	gen      uint64 // the last generation stored
	manifest string // the stored manifest's name; "" before the first store
	parts    [stateParts]manifestPart
	versions [stateBuckets]uint64 // each bucket's version stored (docBucket.version)
	head     []byte               // the head stored
	// stale are the names of documents this process did not store (a
	// process before a crash, a predecessor, a build before the parts):
	// removed once its own first manifest is stored.
	stale []string
}

// names lists every name of the state document's files this process
// knows in the store.
func (s *storedParts) names() []string {
	out := slices.Clone(s.stale)
	if s.manifest != "" {
		out = append(out, s.manifest)
		for _, p := range s.parts {
			out = append(out, p.Name)
		}
	}
	return out
}

// fdStore is systemd's fd store as storeParts uses it (a fake in tests).
type fdStore interface {
	Store(name string, fd int) error
	Remove(name string) error
}

type systemdStore struct{}

func (systemdStore) Store(name string, fd int) error {
	_, err := sdnotify.Store(name, fd)
	return err
}

func (systemdStore) Remove(name string) error {
	_, err := sdnotify.Remove(name)
	return err
}

// storeParts stores the state document's parts that changed since the
// last store, then the manifest naming the new document's parts, then
// removes the manifest and the parts it replaced (control goroutine). It
// returns the bytes written into new memfds. On a failure before the
// manifest is stored, what it stored is removed again and the stored
// document stands; the next store tries again.
func (d *daemon) storeParts(fs fdStore, stop *storedStop) (written int, err error) {
	s := &d.stateStore
	head, err := d.stateHead(stop)
	if err != nil {
		return 0, err
	}
	if err := d.encodeBuckets(); err != nil {
		return 0, err
	}
	if d.stateWriter == nil {
		d.stateWriter = bufio.NewWriterSize(nil, 1<<20)
	}
	gen := s.gen + 1
	first := s.manifest == ""
	next := s.parts
	var added []string
	put := func(name string, write func(w *bufio.Writer) error) error {
		fd, n, err := sealedMemfd(name, d.stateWriter, write)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		written += n
		if err := fs.Store(name, fd); err != nil {
			return fmt.Errorf("store %s: %w", name, err)
		}
		added = append(added, name)
		return nil
	}
	defer func() {
		if err != nil {
			for _, name := range added {
				fs.Remove(name)
			}
		}
	}()
	if first || !bytes.Equal(head, s.head) {
		next[partHead] = manifestPart{Name: "state-h-" + strconv.FormatUint(gen, 10), Sizes: []int{len(head)}}
		if err := put(next[partHead].Name, writeBytes(head)); err != nil {
			return written, err
		}
	}
	var versions [stateBuckets]uint64
	for i := range d.docBuckets {
		b := &d.docBuckets[i]
		versions[i] = b.version
		if !first && b.version == s.versions[i] {
			continue
		}
		part := manifestPart{Name: fmt.Sprintf("state-b%02d-%d", i, gen)}
		err := put(part.Name, func(w *bufio.Writer) error {
			w.Write(b.ruleIDs)
			w.Write(b.slots)
			_, n, err := d.writeBucketRules(w, b, true)
			w.Write(b.verdict)
			w.Write(b.hop)
			part.Sizes = []int{len(b.ruleIDs), len(b.slots), n, len(b.verdict), len(b.hop)}
			return err
		})
		if err != nil {
			return written, err
		}
		next[partBuckets+i] = part
	}
	if len(added) == 0 {
		return 0, nil // nothing changed
	}
	m, err := json.Marshal(stateManifest{Version: stateManifestVersion, Gen: gen, Parts: next[:]})
	if err != nil {
		return written, err
	}
	manifest := "state-m-" + strconv.FormatUint(gen, 10)
	if err := put(manifest, writeBytes(m)); err != nil {
		return written, err
	}
	// The new document stands: what it replaced goes.
	gone := s.stale
	if !first {
		gone = append(gone, s.manifest)
		for i := range next {
			if next[i].Name != s.parts[i].Name {
				gone = append(gone, s.parts[i].Name)
			}
		}
	}
	s.gen, s.manifest, s.parts, s.versions, s.head, s.stale = gen, manifest, next, versions, head, nil
	var errs []error
	for _, name := range gone {
		if err := fs.Remove(name); err != nil {
			s.stale = append(s.stale, name) // removed with the next
			errs = append(errs, fmt.Errorf("remove %s: %w", name, err))
		}
	}
	return written, errors.Join(errs...)
}

// writeBytes is a part's writer of b.
func writeBytes(b []byte) func(w *bufio.Writer) error {
	return func(w *bufio.Writer) error {
		_, err := w.Write(b)
		return err
	}
}

// isStateFile says whether an fd store name is one of the state
// document's files, of any generation or format.
func isStateFile(name string) bool {
	return name == stateFile || strings.HasPrefix(name, "state-")
}

// partGen is the generation a part's or a manifest's name carries (0 for
// another name).
func partGen(name string) uint64 {
	if !strings.HasPrefix(name, "state-") {
		return 0
	}
	g, err := strconv.ParseUint(name[strings.LastIndexByte(name, '-')+1:], 10, 64)
	if err != nil {
		return 0
	}
	return g
}

// readStoredDoc assembles the newest complete state document among the
// fd store's files (name → fd): the newest manifest whose parts are all
// there and of the sizes it says, or the whole document a build before
// the parts stored (stateFile) when it was written after that manifest
// (a downgrade, then an upgrade; by the memfds' modification times, of
// the kernel's coarse clock: at equal times the manifest's document). It returns nil without one, and says
// where the document came from and why it passed over others.
func readStoredDoc(files map[string]int) (doc []byte, from string, skipped []string) {
	var manifests []string
	for name := range files {
		if strings.HasPrefix(name, "state-m-") {
			manifests = append(manifests, name)
		}
	}
	slices.SortFunc(manifests, func(a, b string) int {
		ga, gb := partGen(a), partGen(b)
		switch {
		case ga > gb:
			return -1
		case ga < gb:
			return 1
		}
		return 0
	})
	var at unix.Timespec // the manifest's modification time
	for _, name := range manifests {
		b, err := assembleStored(files, files[name])
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(files[name], &st) == nil {
			at = st.Mtim
		}
		doc, from = b, name
		break
	}
	if fd, ok := files[stateFile]; ok {
		var st unix.Stat_t
		later := unix.Fstat(fd, &st) == nil && (st.Mtim.Sec > at.Sec || st.Mtim.Sec == at.Sec && st.Mtim.Nsec > at.Nsec)
		if doc == nil || later {
			b, err := readFD(fd)
			if err == nil {
				return b, stateFile, skipped
			}
			skipped = append(skipped, fmt.Sprintf("%s: %v", stateFile, err))
		}
	}
	return doc, from, skipped
}

// assembleStored reads a manifest and assembles the document its parts
// make.
func assembleStored(files map[string]int, manifestFD int) ([]byte, error) {
	b, err := readFD(manifestFD)
	if err != nil {
		return nil, err
	}
	var m stateManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Version != stateManifestVersion || len(m.Parts) < partBuckets {
		return nil, fmt.Errorf("manifest of version %d with %d parts", m.Version, len(m.Parts))
	}
	sections := make([][]byte, 0, docSectionCount*len(m.Parts))
	for i, p := range m.Parts {
		want := docSectionCount
		if i < partBuckets {
			want = 1
		}
		if len(p.Sizes) != want {
			return nil, fmt.Errorf("part %s: %d sections, want %d", p.Name, len(p.Sizes), want)
		}
		fd, ok := files[p.Name]
		if !ok {
			return nil, fmt.Errorf("part %s missing", p.Name)
		}
		b, err := readFD(fd)
		if err != nil {
			return nil, fmt.Errorf("part %s: %w", p.Name, err)
		}
		for _, n := range p.Sizes {
			if n < 0 || n > len(b) {
				return nil, fmt.Errorf("part %s: %d bytes, shorter than its manifest says", p.Name, len(b))
			}
			sections, b = append(sections, b[:n]), b[n:]
		}
		if len(b) > 0 {
			return nil, fmt.Errorf("part %s: %d bytes more than its manifest says", p.Name, len(b))
		}
	}
	buckets := make([]docSections, 0, len(m.Parts)-partBuckets)
	for i := partBuckets; i+docSectionCount <= len(sections); i += docSectionCount {
		buckets = append(buckets, docSections{ruleIDs: sections[i], slots: sections[i+1], rules: sections[i+2], verdict: sections[i+3], hop: sections[i+4]})
	}
	var out bytes.Buffer
	if err := assembleDoc(&out, sections[0], buckets); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
