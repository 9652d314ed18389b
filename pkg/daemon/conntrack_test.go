package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/xlbnet/xlb/conntrack"
)

// TestConntrackNamesFromSnapshot: conntrack list names the slots of its
// entries from the published snapshot, without the control goroutine (it
// answers while a reload holds it), and looks up in the registry only the
// slots the snapshot no longer holds.
func TestConntrackNamesFromSnapshot(t *testing.T) {
	d, _ := scaleDaemon(t, 3, 2)
	o := &ops{d: d}
	snap := d.pub.snap
	slot := d.rules["r00001"].slot
	rec := func(rule uint16, backend uint32) conntrack.Record {
		return conntrack.Record{Rule: rule, Value: conntrack.Value{Backend: backend}}
	}

	// Hold the control goroutine, as a long reload would.
	held, release := make(chan struct{}), make(chan struct{})
	go d.do(context.Background(), func() { close(held); <-release })
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	var n slotNames
	err := o.names(ctx, snap, []conntrack.Record{rec(slot, 0), rec(slot, 1)}, &n)
	cancel()
	close(release)
	if err != nil {
		t.Fatalf("names of published slots: %v (waited for the control goroutine)", err)
	}
	if got := n.rules[slot]; got != "r00001" {
		t.Errorf("rule slot %d: %q, want r00001", slot, got)
	}
	for b := range uint32(2) {
		if got, want := n.backends[[2]uint32{uint32(slot), b}], scaleBackend(1, int(b)).String(); got != want {
			t.Errorf("backend slot %d: %q, want %q", b, got, want)
		}
	}
	if len(n.backends) != 2 {
		t.Errorf("%d backends named for 2 entries: %v", len(n.backends), n.backends)
	}

	// A slot the snapshot does not hold (a backend gone from the
	// configuration whose entries remain) comes from the registry.
	gone := scaleBackend(1, 9)
	var goneSlot uint32
	if err := do(d, func() error { goneSlot = d.reg.backend("r00001", gone); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := o.names(context.Background(), snap, []conntrack.Record{rec(slot, goneSlot)}, &n); err != nil {
		t.Fatal(err)
	}
	if got := n.backends[[2]uint32{uint32(slot), goneSlot}]; got != gone.String() {
		t.Errorf("unpublished backend slot %d: %q, want %s", goneSlot, got, gone)
	}
}

// BenchmarkConntrackNames: naming the slots of a listing's default page
// (1000 entries over 100 rules) at 1000 rules × 100 backends, from the
// snapshot; every-slot is the reference, the map of every rule and
// backend the listing built on the control goroutine before.
func BenchmarkConntrackNames(b *testing.B) {
	d, _ := scaleDaemon(b, 1000, 100)
	o := &ops{d: d}
	var recs []conntrack.Record
	for i := range 1000 {
		rt := d.rules[fmt.Sprintf("r%05d", i%100*10)]
		recs = append(recs, conntrack.Record{Rule: rt.slot, Value: conntrack.Value{Backend: uint32(i / 100 * 7 % 100)}})
	}
	b.Run("snapshot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var n slotNames
			if err := o.names(context.Background(), d.pub.snap, recs, &n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("every-slot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rules, backends := map[uint16]string{}, map[[2]uint32]string{}
			err := d.do(context.Background(), func() {
				for name, s := range d.reg.rules {
					rules[s] = name
					for addr, bs := range d.reg.backends[name] {
						backends[[2]uint32{uint32(s), bs}] = addr.String()
					}
				}
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
