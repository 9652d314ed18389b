package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/control"
)

// BenchmarkStateDocument: the state document a restart offers and, under
// systemd, every publication stores (systemd.go storeState), written into
// its sealed memfd, at 100 backends a rule, once every part has been
// encoded (as after the daemon's first publication; nothing changed
// since); it reports the document's bytes.
func BenchmarkStateDocument(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			d, _ := scaleDaemon(b, n, 100)
			if err := do(d, func() error { _, err := d.stateBytes(); return err }); err != nil {
				b.Fatal(err) // every part encoded once, as the daemon's first publication does
			}
			for _, fresh := range []bool{false, true} {
				name := "spliced"
				if fresh {
					// The reference: every part encoded again, as each
					// document was before the parts were kept.
					name = "fresh"
				}
				b.Run(name, func(b *testing.B) {
					var size int
					b.ReportAllocs()
					for b.Loop() {
						err := do(d, func() error {
							if fresh {
								d.forgetEncoded()
							}
							fd, n, err := d.writeState(nil)
							if err == nil {
								unix.Close(fd)
							}
							size = n
							return err
						})
						if err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(size), "bytes/doc")
				})
			}
		})
	}
}

// TestStateDocumentFollowsChanges: the state document, spliced from what
// earlier documents encoded (each rule's carried failover state, the
// buckets of rules and verdicts), says what one encoded afresh says after
// each kind of change that reaches them: a health verdict, a CLI drain, a
// reload that adds a backend and a rule sharing the first rule's probe,
// a next hop changed and one forgotten, and a reload that removes a
// backend and a rule. So does the document
// assembled from the parts in the fd store, stored after each change
// (storeParts: only the parts that changed). Without the invalidation of
// a kind, its document keeps the old state and differs.
func TestStateDocumentFollowsChanges(t *testing.T) {
	files := map[string]string{
		"rules.d/a.toml": vipRule("203.0.113.10", "", healthGroup("198.51.100.10", "198.51.100.11")),
		"rules.d/b.toml": vipRule("203.0.113.11", "", healthGroup("198.51.100.20")),
	}
	var addrs []netip.Addr
	for _, a := range []string{"198.51.100.10", "198.51.100.11", "198.51.100.12", "198.51.100.20"} {
		addrs = append(addrs, addr(a))
	}
	d, dir := healthDaemon(t, files, addrs)
	o := &ops{d: d}
	store := newFakeStore(t)
	if err := do(d, func() error { _, err := d.storeParts(store, nil); return err }); err != nil {
		t.Fatal(err)
	}
	store.settle()
	splicedAndFresh(t, d) // every part encoded once
	for _, tc := range []struct {
		what   string
		change func() error
	}{
		{"a verdict", func() error {
			return do(d, func() error {
				d.onHealth(report("a", "198.51.100.10", failover.HealthUnhealthy, "connection refused"))
				d.onHealth(report("b", "198.51.100.20", failover.HealthHealthy, "")) // forgotten with b
				d.applyProbes()
				return d.publish()
			})
		}},
		{"a CLI drain", func() error {
			_, err := o.ChangeBackend(context.Background(), control.BackendChange{Action: control.ActionDrain, Rule: "b", Backend: "198.51.100.20"})
			return err
		}},
		{"a reload adding", func() error {
			reloadWith(t, d, dir, map[string]string{
				"rules.d/a.toml": vipRule("203.0.113.10", "", healthGroup("198.51.100.10", "198.51.100.11", "198.51.100.12")),
				"rules.d/c.toml": vipRule("203.0.113.12", "", healthGroup("198.51.100.10")),
			})
			return nil
		}},
		{"a next hop changed and one forgotten", func() error {
			// As resolvePass and the periodic resolution record them.
			return do(d, func() error {
				k := nhKey{addr("198.51.100.11"), false}
				nh := d.nexthops[k]
				nh.err = errors.New("no route to host")
				d.setNextHop(k, nh, true)
				d.forgetNextHop(nhKey{addr("198.51.100.20"), false})
				return nil
			})
		}},
		{"a reload removing", func() error {
			reloadWith(t, d, dir, map[string]string{
				"rules.d/a.toml": vipRule("203.0.113.10", "", healthGroup("198.51.100.10", "198.51.100.12")),
				"rules.d/b.toml": "",
			})
			return nil
		}},
	} {
		if err := tc.change(); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		var stored stateDoc
		err := do(d, func() error {
			if _, err := d.storeParts(store, nil); err != nil {
				return err
			}
			b, from, skipped := readStoredDoc(store.settle())
			if b == nil {
				return fmt.Errorf("no document in the store: %v", skipped)
			}
			if from != d.stateStore.manifest {
				return fmt.Errorf("the store's document is %s, want %s", from, d.stateStore.manifest)
			}
			return json.Unmarshal(b, &stored)
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		spliced, fresh := splicedAndFresh(t, d)
		for _, got := range []struct {
			what string
			doc  stateDoc
		}{{"spliced", spliced}, {"stored in parts", normalDoc(stored)}} {
			if !reflect.DeepEqual(got.doc, fresh) {
				a, _ := json.Marshal(got.doc)
				b, _ := json.Marshal(fresh)
				i := 0
				for i < min(len(a), len(b)) && a[i] == b[i] {
					i++
				}
				from := max(0, i-200)
				t.Errorf("after %s the document %s differs from one encoded afresh at byte %d:\n…%s\n…%s", tc.what, got.what, i, a[from:min(len(a), i+100)], b[from:min(len(b), i+100)])
			}
		}
	}
}

// splicedAndFresh decodes d's state document as the daemon writes it,
// then as one encoded afresh (every kept part dropped), both normalised.
func splicedAndFresh(t *testing.T, d *daemon) (spliced, fresh stateDoc) {
	t.Helper()
	err := do(d, func() error {
		b, err := d.stateBytes()
		if err == nil {
			err = json.Unmarshal(b, &spliced)
		}
		if err != nil {
			return err
		}
		d.forgetEncoded()
		if b, err = d.stateBytes(); err == nil {
			err = json.Unmarshal(b, &fresh)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return normalDoc(spliced), normalDoc(fresh)
}

// forgetEncoded drops every part of the state document kept encoded, and
// files the buckets' rules, verdicts and next hops again from the
// registry, d.probes and d.nexthops: the next document is encoded afresh.
func (d *daemon) forgetEncoded() {
	d.resetDocBuckets()
	for _, rt := range d.rules {
		rt.carryOf = nil
	}
}

// normalDoc sorts what a state document lists in map order, and drops
// the clock base (the clock's reading of its base moves by nanoseconds
// from one call to the next).
func normalDoc(d stateDoc) stateDoc {
	d.ClockBase = 0
	slices.SortFunc(d.Probes, func(a, b probeState) int {
		return cmp.Or(strings.Compare(a.Rule, b.Rule), a.Addr.Compare(b.Addr))
	})
	slices.SortFunc(d.NextHops, func(a, b nexthopState) int { return a.Addr.Compare(b.Addr) })
	slices.SortFunc(d.Runtime, func(a, b ruleState) int { return strings.Compare(a.Name, b.Name) })
	return d
}

// TestCarriesEncodedAside: a restart encodes the rules' carried failover
// states off the control goroutine while its successor starts; each is
// kept for its rule unless the rule was computed again meanwhile (a CLI
// drain of b here), and the document then says what one encoded afresh
// says.
func TestCarriesEncodedAside(t *testing.T) {
	files := map[string]string{
		"rules.d/a.toml": vipRule("203.0.113.10", "", healthGroup("198.51.100.10", "198.51.100.11")),
		"rules.d/b.toml": vipRule("203.0.113.11", "", healthGroup("198.51.100.20")),
	}
	d, _ := healthDaemon(t, files, []netip.Addr{addr("198.51.100.10"), addr("198.51.100.11"), addr("198.51.100.20")})
	var cs []pendingCarry
	if err := do(d, func() error { cs = d.unencodedCarries(); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 {
		t.Fatalf("%d rules to encode, want a and b", len(cs))
	}
	encodeCarries(cs)
	if _, err := (&ops{d: d}).ChangeBackend(context.Background(), control.BackendChange{Action: control.ActionDrain, Rule: "b", Backend: "198.51.100.20"}); err != nil {
		t.Fatal(err)
	}
	err := do(d, func() error {
		installCarries(cs)
		if a, b := d.rules["a"], d.rules["b"]; a.carryOf != a.prev || b.carryOf == b.prev {
			return fmt.Errorf("kept: a %v, b %v; want a's only (b was computed again)", a.carryOf == a.prev, b.carryOf == b.prev)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	spliced, fresh := splicedAndFresh(t, d)
	if !reflect.DeepEqual(spliced, fresh) {
		t.Errorf("the document with the states encoded aside differs from one encoded afresh")
	}
}

// stateBytes writes the state document as a store or an offer does, and
// reads it back from its memfd, which must be sealed against changes.
func (d *daemon) stateBytes() ([]byte, error) {
	fd, n, err := d.writeState(nil)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, err
	}
	if want := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL; seals&want != want {
		return nil, fmt.Errorf("the state memfd's seals are %#x, want %#x", seals, want)
	}
	b := make([]byte, n)
	if _, err := unix.Pread(fd, b, 0); err != nil {
		return nil, err
	}
	return b, nil
}
