package failover

import (
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)

// fakeClock is the injected time of a test: Compute takes now from it.
type fakeClock struct{ now time.Time }

func newClock() *fakeClock { return &fakeClock{now: t0} }

func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.now = c.now.Add(d)
	return c.now
}

// be builds a backend with a slot ID derived from its name.
func be(name, group string, h Health, opts ...func(*Backend)) Backend {
	f := fnv.New32a()
	f.Write([]byte(name))
	b := Backend{Name: name, ID: f.Sum32(), Group: group, Health: h}
	for _, o := range opts {
		o(&b)
	}
	return b
}

func weight(w uint32) func(*Backend) {
	return func(b *Backend) { b.Weight, b.WeightState = w, WeightOK }
}

func weightState(s WeightState, w uint32) func(*Backend) {
	return func(b *Backend) { b.Weight, b.WeightState = w, s }
}

func drained(at time.Time) func(*Backend) {
	return func(b *Backend) { b.Admin, b.DrainedAt = AdminDrained, at }
}

func removed(at time.Time) func(*Backend) {
	return func(b *Backend) { b.Removed, b.RemovedAt = true, at }
}

func primary(name string) Group { return Group{Name: name, Role: RolePrimary, CapacityScaler: 1} }

func failoverGroup(name string) Group {
	return Group{Name: name, Role: RoleFailover, CapacityScaler: 1}
}

const (
	up      = HealthHealthy
	down    = HealthUnhealthy
	unknown = HealthUnknown
)

func mustCompute(t testing.TB, p Policy, gs []Group, bs []Backend, prev *State, now time.Time) *State {
	t.Helper()
	st, err := Compute(p, gs, bs, prev, now)
	if err != nil {
		t.Fatalf("Compute: %v", err)
	}
	return st
}

// names lists the eligible members as "name" or "name:weight".
func names(ms []Member, withWeights bool) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
		if withWeights {
			out[i] += ":" + strconv.FormatUint(uint64(m.Weight), 10)
		}
	}
	return strings.Join(out, " ")
}

func backendState(t testing.TB, st *State, name string) *BackendState {
	t.Helper()
	b, ok := st.Backend(name)
	if !ok {
		t.Fatalf("backend %q not in state", name)
	}
	return b
}

// entryValid runs the validity rule the workers run (Gens.Valid) for an
// entry stamped s on backend b as Compute left it, comparing b's draining
// deadline with now as the dataplane compares its copy.
func entryValid(b *BackendState, s Stamp, now time.Time, persists bool) bool {
	return b.Gens().Valid(s, persists, now.Before(b.DrainUntil))
}

func reversed[T any](s []T) []T {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}
