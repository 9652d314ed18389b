package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/control"
)

// fakeStore stands for systemd's fd store: it records each message
// (store or remove) and applies them when settled, as systemd does in
// the order they come.
type fakeStore struct {
	t       *testing.T
	files   map[string]int // what the store holds after the settled messages
	pending []storeOp
	fail    func(op storeOp) error // a message the manager refuses; nil: none
}

type storeOp struct {
	remove bool
	name   string
	fd     int // a duplicate of the fd stored
}

func newFakeStore(t *testing.T) *fakeStore {
	f := &fakeStore{t: t, files: map[string]int{}}
	t.Cleanup(func() {
		for _, fd := range f.files {
			unix.Close(fd)
		}
		for _, op := range f.pending {
			if !op.remove {
				unix.Close(op.fd)
			}
		}
	})
	return f
}

func (f *fakeStore) Store(name string, fd int) error {
	if f.fail != nil {
		if err := f.fail(storeOp{name: name}); err != nil {
			return err
		}
	}
	nfd, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	f.pending = append(f.pending, storeOp{name: name, fd: nfd})
	return nil
}

func (f *fakeStore) Remove(name string) error {
	if f.fail != nil {
		if err := f.fail(storeOp{remove: true, name: name}); err != nil {
			return err
		}
	}
	f.pending = append(f.pending, storeOp{remove: true, name: name})
	return nil
}

// settle applies the messages sent so far and returns the store's
// content.
func (f *fakeStore) settle() map[string]int {
	f.files = applyOps(f.files, f.pending)
	f.pending = nil
	return f.files
}

// applyOps is what the store holds after ops, from files (not changed;
// the fds are shared).
func applyOps(files map[string]int, ops []storeOp) map[string]int {
	out := maps.Clone(files)
	for _, op := range ops {
		if op.remove {
			delete(out, op.name)
		} else {
			out[op.name] = op.fd
		}
	}
	return out
}

func stateFileNames(files map[string]int) []string {
	var out []string
	for name := range files {
		if isStateFile(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// storedDoc decodes the document a restore finds in files, normalised.
func storedDoc(t *testing.T, files map[string]int) stateDoc {
	t.Helper()
	b, from, skipped := readStoredDoc(files)
	if b == nil {
		t.Fatalf("no complete document in the store %v: %v", stateFileNames(files), skipped)
	}
	var doc stateDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("the document of %s: %v", from, err)
	}
	return normalDoc(doc)
}

func storeDaemon(t *testing.T) (*daemon, *ops) {
	files := map[string]string{}
	var addrs []netip.Addr
	for i := range 8 { // rules r0…r7 of three backends each
		var bs []string
		for j := range 3 {
			a := fmt.Sprintf("198.51.100.%d", 10*i+j+1)
			bs = append(bs, a)
			addrs = append(addrs, addr(a))
		}
		files[fmt.Sprintf("rules.d/r%d.toml", i)] = vipRule(fmt.Sprintf("203.0.113.%d", 10+i), "", healthGroup(bs...))
	}
	d, _ := healthDaemon(t, files, addrs)
	return d, &ops{d: d}
}

// TestStoreIsAtomic: a store replaces the document in the fd store by
// messages, each of which systemd applies on its own; a crash between
// any two of them (the store as it is after a prefix of the messages)
// leaves a complete document: the one before the store or the one after.
// It holds for a change of one rule's verdict (one bucket and the
// manifest replaced) and for the first store of a process that found
// another's document, of the parts' format or before it (everything
// written, then the old files removed).
func TestStoreIsAtomic(t *testing.T) {
	d, o := storeDaemon(t)
	store := newFakeStore(t)
	docNow := func() stateDoc {
		var doc stateDoc
		err := do(d, func() error {
			b, err := d.stateBytes()
			if err == nil {
				err = json.Unmarshal(b, &doc)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return normalDoc(doc)
	}
	storeNow := func() []storeOp {
		t.Helper()
		if err := do(d, func() error { _, err := d.storeParts(store, nil); return err }); err != nil {
			t.Fatal(err)
		}
		return store.pending
	}
	// A predecessor of the old format left its whole document.
	legacy := docNow()
	{
		fd, _, err := d.writeState(nil)
		if err != nil {
			t.Fatal(err)
		}
		store.files[stateFile] = fd
		d.stateStore.stale = []string{stateFile}
	}
	changes := []struct {
		what   string
		change func() error
		writes int // parts stored, the manifest included; -1: every part
	}{
		{"the first store", func() error { return nil }, -1},
		{"a verdict", func() error {
			return do(d, func() error {
				d.onHealth(report("r3", "198.51.100.31", failover.HealthUnhealthy, "connection refused"))
				d.applyProbes()
				return d.publish()
			})
		}, 2},
		{"a CLI drain", func() error {
			_, err := o.ChangeBackend(context.Background(), control.BackendChange{Action: control.ActionDrain, Rule: "r5", Backend: "198.51.100.52"})
			return err
		}, 2},
		{"a process after a crash", func() error {
			// It found the store as it is and writes everything anew.
			return do(d, func() error {
				d.stateStore = storedParts{stale: stateFileNames(store.files), gen: d.stateStore.gen}
				return nil
			})
		}, -1},
	}
	before := legacy
	for _, c := range changes {
		if err := c.change(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		ops := storeNow()
		after := docNow()
		stores := 0
		for _, op := range ops {
			if !op.remove {
				stores++
			}
		}
		if want := c.writes; want >= 0 && stores != want || want < 0 && stores != stateParts+1 {
			t.Errorf("%s: %d parts stored, want %d (-1: all %d and the manifest)", c.what, stores, want, stateParts)
		}
		base := store.files
		for i := 0; i <= len(ops); i++ {
			got := storedDoc(t, applyOps(base, ops[:i]))
			if !reflect.DeepEqual(got, before) && !reflect.DeepEqual(got, after) {
				t.Errorf("%s: crashed after %d of %d messages, the store holds a document neither before nor after", c.what, i, len(ops))
			}
			if i == 0 && !reflect.DeepEqual(got, before) || i == len(ops) && !reflect.DeepEqual(got, after) {
				t.Errorf("%s: after %d of %d messages the store's document is not the expected one", c.what, i, len(ops))
			}
		}
		files := store.settle()
		// Only the new document's files are left.
		want := []string{d.stateStore.manifest}
		for _, p := range d.stateStore.parts {
			want = append(want, p.Name)
		}
		slices.Sort(want)
		if got := stateFileNames(files); !slices.Equal(got, want) {
			t.Errorf("%s: the store holds %v, want %v", c.what, got, want)
		}
		before = after
	}
	if reflect.DeepEqual(legacy, before) {
		t.Error("the changes changed nothing in the document")
	}
}

// TestStoreFailureKeepsDocument: when systemd refuses a message of a
// store (the store full, the socket gone), what the store had sent is
// taken back and the document before it stands; the next store writes
// the change.
func TestStoreFailureKeepsDocument(t *testing.T) {
	d, o := storeDaemon(t)
	store := newFakeStore(t)
	if err := do(d, func() error { _, err := d.storeParts(store, nil); return err }); err != nil {
		t.Fatal(err)
	}
	before := storedDoc(t, store.settle())
	if _, err := o.ChangeBackend(context.Background(), control.BackendChange{Action: control.ActionDrain, Rule: "r1", Backend: "198.51.100.12"}); err != nil {
		t.Fatal(err)
	}
	store.fail = func(op storeOp) error {
		if strings.HasPrefix(op.name, "state-m-") {
			return fmt.Errorf("refused")
		}
		return nil
	}
	if err := do(d, func() error { _, err := d.storeParts(store, nil); return err }); err == nil {
		t.Fatal("a refused manifest: no error")
	}
	if got := storedDoc(t, store.settle()); !reflect.DeepEqual(got, before) {
		t.Error("after a failed store the store's document is not the one before")
	}
	store.fail = nil
	if err := do(d, func() error { _, err := d.storeParts(store, nil); return err }); err != nil {
		t.Fatal(err)
	}
	if got := storedDoc(t, store.settle()); reflect.DeepEqual(got, before) {
		t.Error("the store after the failed one did not store the change")
	}
	if n := len(stateFileNames(store.files)); n != stateParts+1 {
		t.Errorf("%d state files in the store, want %d", n, stateParts+1)
	}
}

// TestOneRuleStoresItsBucket: a change of one rule (a CLI drain) stores
// its bucket and the manifest, and nothing else: the bytes written are
// the bucket's and the manifest's.
func TestOneRuleStoresItsBucket(t *testing.T) {
	d, o := storeDaemon(t)
	store := newFakeStore(t)
	var total int
	if err := do(d, func() error { n, err := d.storeParts(store, nil); total = n; return err }); err != nil {
		t.Fatal(err)
	}
	store.settle()
	if _, err := o.ChangeBackend(context.Background(), control.BackendChange{Action: control.ActionDrain, Rule: "r6", Backend: "198.51.100.62"}); err != nil {
		t.Fatal(err)
	}
	var written int
	if err := do(d, func() error { n, err := d.storeParts(store, nil); written = n; return err }); err != nil {
		t.Fatal(err)
	}
	var stored []string
	for _, op := range store.pending {
		if !op.remove {
			stored = append(stored, op.name)
		}
	}
	bucket := stateBucket("r6")
	b := d.stateStore.parts[partBuckets+bucket]
	want := []string{b.Name, d.stateStore.manifest}
	if !slices.Equal(stored, want) {
		t.Errorf("stored %v, want r6's bucket and the manifest %v", stored, want)
	}
	var manifestSize int
	var st unix.Stat_t
	files := store.settle()
	if err := unix.Fstat(files[d.stateStore.manifest], &st); err != nil {
		t.Fatal(err)
	}
	manifestSize = int(st.Size)
	if bucketSize := b.Sizes[0] + b.Sizes[1] + b.Sizes[2] + b.Sizes[3] + b.Sizes[4]; written != bucketSize+manifestSize {
		t.Errorf("wrote %d bytes, want the bucket's %d and the manifest's %d", written, bucketSize, manifestSize)
	}
	if written*2 > total {
		t.Errorf("a one-rule change wrote %d bytes of the whole document's %d", written, total)
	}
	// Nothing changed: nothing stored.
	if err := do(d, func() error { n, err := d.storeParts(store, nil); written = n; return err }); err != nil || written != 0 || len(store.pending) != 0 {
		t.Errorf("a store without a change wrote %d bytes in %d messages (%v)", written, len(store.pending), err)
	}
}

// TestStoredDocNewest: a restore reads the newest manifest whose parts
// are all there, passing over one with a part missing or of another
// size, and a whole document of the format before the parts only when it
// was written after that manifest.
func TestStoredDocNewest(t *testing.T) {
	d, o := storeDaemon(t)
	store := newFakeStore(t)
	storeNow := func() {
		if err := do(d, func() error { _, err := d.storeParts(store, nil); return err }); err != nil {
			t.Fatal(err)
		}
	}
	storeNow()
	first := store.settle()
	firstManifest := d.stateStore.manifest
	old := storedDoc(t, first)
	if _, err := o.ChangeBackend(context.Background(), control.BackendChange{Action: control.ActionDrain, Rule: "r2", Backend: "198.51.100.21"}); err != nil {
		t.Fatal(err)
	}
	storeNow()
	ops := store.pending
	// Both manifests and every part of both (the removals not applied).
	var stores []storeOp
	for _, op := range ops {
		if !op.remove {
			stores = append(stores, op)
		}
	}
	both := applyOps(first, stores)
	newer := storedDoc(t, both)
	if reflect.DeepEqual(newer, old) {
		t.Fatal("the newer manifest's document is the older one")
	}
	// The newer manifest's bucket missing: the older document.
	missing := maps.Clone(both)
	delete(missing, stores[0].name)
	if _, from, _ := readStoredDoc(missing); from != firstManifest {
		t.Errorf("with a part missing the document came from %s, want %s", from, firstManifest)
	}
	if got := storedDoc(t, missing); !reflect.DeepEqual(got, old) {
		t.Error("with a part missing the document is not the older one")
	}
	// A part of another size than the manifest says: passed over.
	short := maps.Clone(both)
	fd, err := unix.MemfdCreate("short", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Write(fd, []byte("{}"))
	short[stores[0].name] = fd
	if _, from, _ := readStoredDoc(short); from != firstManifest {
		t.Errorf("with a part of another size the document came from %s, want %s", from, firstManifest)
	}
	// A whole document written after the newest manifest (a build before
	// the parts ran since) is newer; one written before is not. (A
	// memfd's modification time has the kernel's coarse clock: the
	// writes are a few ticks apart.)
	time.Sleep(30 * time.Millisecond)
	legacyFD, _, err := d.writeState(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(legacyFD)
	withLegacy := maps.Clone(both)
	withLegacy[stateFile] = legacyFD
	if _, from, _ := readStoredDoc(withLegacy); from != stateFile {
		t.Errorf("with a whole document written last the document came from %s", from)
	}
	storeNow() // nothing changed: no new manifest, so write one anew
	d.stateStore = storedParts{gen: d.stateStore.gen}
	time.Sleep(30 * time.Millisecond)
	storeNow()
	later := applyOps(withLegacy, store.pending)
	if _, from, _ := readStoredDoc(later); from != d.stateStore.manifest {
		t.Errorf("with a manifest written after the whole document the document came from %s", from)
	}
	if got := partGen(d.stateStore.manifest); got <= partGen(firstManifest) {
		t.Errorf("generation %d after %d", got, partGen(firstManifest))
	}
}

// discardStore takes every message and keeps nothing (benchmarks).
type discardStore struct{}

func (discardStore) Store(string, int) error { return nil }
func (discardStore) Remove(string) error     { return nil }

// BenchmarkStateStore: what storing the state document in systemd's fd
// store costs after a one-backend change of one rule (its failover state
// computed anew, a backend's next hop recorded), at 100 backends a rule:
// in parts (storeParts: the rule's bucket, the next hop's, the manifest)
// against the whole document in one memfd
// (writeState, as every store did before the parts). It reports the bytes
// written into memfds per store.
func BenchmarkStateStore(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			d, _ := scaleDaemon(b, n, 100)
			if err := do(d, func() error { _, err := d.storeParts(discardStore{}, nil); return err }); err != nil {
				b.Fatal(err) // every part encoded and stored once, as the first publication does
			}
			var sizes [docSectionCount]int
			do(d, func() error {
				for i := range d.docBuckets {
					bk := &d.docBuckets[i]
					sizes[0] += len(bk.ruleIDs)
					sizes[1] += len(bk.slots)
					_, n, _ := d.writeBucketRules(io.Discard, bk, true)
					sizes[2] += n
					sizes[3] += len(bk.verdict)
					sizes[4] += len(bk.hop)
				}
				return nil
			})
			b.Logf("the buckets: rule slots %d bytes, backend slots %d, rules %d, verdicts %d, next hops %d", sizes[0], sizes[1], sizes[2], sizes[3], sizes[4])
			// The change, as a reload adding a backend to a rule makes it:
			// rule r00007's failover state computed anew, and a next hop
			// recorded.
			const rule = "r00007"
			hop := nhKey{scaleBackend(7, 100), false}
			change := func() {
				d.ruleChanged(rule)
				d.rules[rule].carryOf = nil
				d.forgetNextHop(hop)
				d.setNextHop(hop, d.nexthops[nhKey{scaleBackend(7, 0), false}], true)
			}
			for _, whole := range []bool{false, true} {
				name := "parts"
				if whole {
					name = "whole"
				}
				b.Run(name, func(b *testing.B) {
					var written int
					for b.Loop() {
						err := do(d, func() error {
							change()
							if whole {
								fd, n, err := d.writeState(nil)
								if err == nil {
									unix.Close(fd)
								}
								written = n
								return err
							}
							n, err := d.storeParts(discardStore{}, nil)
							written = n
							return err
						})
						if err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(written), "bytes/store")
				})
			}
		})
	}
}
