package daemon

import (
	"fmt"
	"testing"

	"github.com/xlbnet/xlb/pkg/config"
)

// values lists every value of a config enum: those with a name (String
// says INVALID past the last one).
func values[C interface {
	~uint8
	fmt.Stringer
}]() []C {
	var out []C
	for v := C(0); v.String() != "INVALID"; v++ {
		out = append(out, v)
	}
	return out
}

// complete checks that the table has exactly one entry per named value of
// the enum, and that no two values share a runtime value unless allowed.
func complete[C interface {
	~uint8
	fmt.Stringer
}, R comparable](t *testing.T, name string, m enumMap[C, R], shared ...C) {
	t.Helper()
	vs := values[C]()
	if len(vs) < 2 {
		t.Fatalf("%s: only %d named values", name, len(vs))
	}
	seen := map[R]C{}
	for _, v := range vs {
		r, ok := m[v]
		if !ok {
			t.Errorf("%s: %s has no runtime value", name, v)
			continue
		}
		if prev, dup := seen[r]; dup && !contains(shared, v) {
			t.Errorf("%s: %s and %s both map to %v", name, prev, v, r)
		}
		seen[r] = v
	}
	if len(m) != len(vs) {
		t.Errorf("%s: %d entries for %d named values", name, len(m), len(vs))
	}
}

func contains[C comparable](xs []C, x C) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func TestEnumTables(t *testing.T) {
	complete(t, "affinities", affinities)
	complete(t, "trackingModes", trackingModes)
	complete(t, "persistences", persistences)
	complete(t, "roles", roles)
	complete(t, "zonalModes", zonalModes)
	complete(t, "ruleProtocols", ruleProtocols)
	complete(t, "ipProtocols", ipProtocols, config.ProtocolL3Default) // L3_DEFAULT is looked up as TCP
	complete(t, "encapKinds", encapKinds)
	complete(t, "healthKinds", healthKinds)
	complete(t, "proxyHeaders", proxyHeaders)
	complete(t, "attachModes", attachModes)
	complete(t, "bindModes", bindModes)

	// Names on both sides agree where both sides have them.
	for _, v := range values[config.Affinity]() {
		if got := affinities.of(v).String(); got != v.String() {
			t.Errorf("affinity %s → %s", v, got)
		}
	}
	for _, v := range values[config.TrackingMode]() {
		if got := trackingModes.of(v).String(); got != v.String() {
			t.Errorf("tracking mode %s → %s", v, got)
		}
	}
	for _, v := range values[config.HealthCheckType]() {
		if got := healthKinds.of(v).String(); got != v.String() {
			t.Errorf("health check type %s → %s", v, got)
		}
	}
	for _, v := range values[config.ProxyHeader]() {
		if got := proxyHeaders.of(v).String(); got != v.String() {
			t.Errorf("proxy header %s → %s", v, got)
		}
	}
	for _, v := range values[config.EncapType]() {
		if got := encapKinds.of(v).String(); got != v.String() {
			t.Errorf("encap %s → %s", v, got)
		}
	}

	defer func() {
		if recover() == nil {
			t.Error("a value without an entry did not panic")
		}
	}()
	encapKinds.of(config.EncapType(200))
}
