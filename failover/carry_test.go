package failover

import (
	"bytes"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

// TestCarryContinues drives a rule through a drain, a failover switch, a
// pending failback, a removal and zonal views, and after every step hands
// the State to a "successor" (MarshalCarry, UnmarshalCarry): the successor
// computes exactly what the original does from then on, generations,
// deadlines, switches and private fields included.
func TestCarryContinues(t *testing.T) {
	p := DefaultPolicy()
	p.ConnectionDrainOnFailover = false // switches bump FlushGen
	p.FailbackDelay = 30 * time.Second
	p.ConnectionDrainingTimeout = time.Minute
	p.Zonal = ZonalAffinity{Mode: ZonalSpillCrossZone, Clients: []ClientZone{{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Zone: "zone-a"}}}
	groups := zonalGroups()
	clock := newClock()
	steps := []struct {
		name     string
		after    time.Duration
		backends []Backend
	}{
		{"all up", 0, []Backend{be("a1", "a", up, weight(3)), be("a2", "a", up), be("b1", "b", up), be("f1", "f", up)}},
		{"drain a2", time.Second, []Backend{be("a1", "a", up), be("a2", "a", up, drained(t0.Add(time.Second))), be("b1", "b", up), be("f1", "f", up)}},
		{"primaries down", time.Second, []Backend{be("a1", "a", down), be("a2", "a", down, drained(t0.Add(time.Second))), be("b1", "b", down), be("f1", "f", up)}},
		{"primaries back, failback pending", time.Second, []Backend{be("a1", "a", up), be("a2", "a", up, drained(t0.Add(time.Second))), be("b1", "b", up), be("f1", "f", up)}},
		{"failback", 31 * time.Second, []Backend{be("a1", "a", up), be("a2", "a", up, drained(t0.Add(time.Second))), be("b1", "b", up), be("f1", "f", up)}},
		{"remove b1", time.Second, []Backend{be("a1", "a", up), be("a2", "a", up, drained(t0.Add(time.Second))), be("b1", "b", up, removed(t0.Add(35*time.Second))), be("f1", "f", up)}},
		{"a1 unhealthy", time.Second, []Backend{be("a1", "a", down), be("a2", "a", up, drained(t0.Add(time.Second))), be("b1", "b", up, removed(t0.Add(35*time.Second))), be("f1", "f", up)}},
	}
	var orig, succ *State
	for _, s := range steps {
		now := clock.Advance(s.after)
		o, err := Compute(p, groups, s.backends, orig, now)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Compute(p, groups, s.backends, succ, now)
		if err != nil {
			t.Fatal(err)
		}
		ob, _ := o.MarshalCarry()
		cb, _ := c.MarshalCarry()
		if !bytes.Equal(ob, cb) {
			t.Fatalf("%s: the successor computed\n%s\nthe original\n%s", s.name, cb, ob)
		}
		if !reflect.DeepEqual(o, c) {
			t.Fatalf("%s: states differ in private fields", s.name)
		}
		orig = o
		succ, err = UnmarshalCarry(ob)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(o, succ) {
			t.Fatalf("%s: the carried state differs from the original:\n%+v\n%+v", s.name, succ, o)
		}
	}
	if orig.FlushGen == 0 || orig.History == nil {
		t.Fatalf("the scenario never switched (FlushGen %d, %d events): it tests nothing", orig.FlushGen, len(orig.History))
	}
}

func TestUnmarshalCarryRejects(t *testing.T) {
	for _, in := range []string{`{`, `{}`, `{"state":{"Backends":[{"Name":"x"}]},"admin":[]}`} {
		if _, err := UnmarshalCarry([]byte(in)); err == nil {
			t.Errorf("UnmarshalCarry(%s) accepted", in)
		}
	}
}
