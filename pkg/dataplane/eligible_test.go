package dataplane

// Conformance tests for the rows of docs/design.md#behaviour-contract that
// depend on the eligible-set engine: eligible backends, weights, failover,
// draining and persistence. Each drives failover.Compute → BuildRule → Decide
// with packets and a fake clock.

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/packet"
)

var epoch = time.Unix(1_800_000_000, 0)

type fakeClock struct{}

func (fakeClock) Ticks(t time.Time) conntrack.Time { return conntrack.TimeOf(int64(t.Sub(epoch))) }

// fworld is a rule whose eligible set comes from failover.Compute.
type fworld struct {
	t        *testing.T
	cfg      RuleConfig
	policy   failover.Policy
	groups   []failover.Group
	backends []failover.Backend
	st       *failover.State
	snap     *Snapshot
	q        *FlowTables
	now      conntrack.Time
}

type fb struct {
	name   string
	group  string
	health failover.Health
	weight uint32
}

func newFWorld(t *testing.T, cfg RuleConfig, p failover.Policy, groups []failover.Group, bs []fb) *fworld {
	t.Helper()
	if cfg.TableSize == 0 {
		cfg.TableSize = 65537
	}
	cfg.Name = "web"
	cfg.Match.VIP = testVIP
	if cfg.Match.Protocol != RuleTCP {
		cfg.Match.AllPorts = true
	} else {
		cfg.Match.Ports = []PortRange{{80, 80}}
	}
	if groups == nil {
		groups = []failover.Group{{Name: "a", Role: failover.RolePrimary, CapacityScaler: 1}}
	}
	ct, _ := conntrack.New(1<<14, 1)
	sess, _ := conntrack.NewShared(1<<12, 2)
	w := &fworld{t: t, cfg: cfg, policy: p, groups: groups, q: &FlowTables{Conntrack: ct, Sessions: sess}, now: 160}
	for i, b := range bs {
		g := b.group
		if g == "" {
			g = "a"
		}
		ws := failover.WeightOK
		w.backends = append(w.backends, failover.Backend{Name: b.name, ID: uint32(i), Group: g, Health: b.health, Weight: b.weight, WeightState: ws})
	}
	w.compute()
	return w
}

func (w *fworld) wall() time.Time {
	return epoch.Add(time.Duration(w.now) * time.Second / conntrack.TicksPerSecond)
}

func (w *fworld) compute() {
	w.t.Helper()
	st, err := failover.Compute(w.policy, w.groups, w.backends, w.st, w.wall())
	if err != nil {
		w.t.Fatal(err)
	}
	w.st = st
	r, err := BuildRule(w.cfg, st, testSeed, fakeClock{})
	if err != nil {
		w.t.Fatal(err)
	}
	s, err := NewSnapshot(testSeed, []*Rule{r})
	if err != nil {
		w.t.Fatal(err)
	}
	w.snap = s
}

func (w *fworld) set(name string, f func(b *failover.Backend)) {
	for i := range w.backends {
		if w.backends[i].Name == name {
			f(&w.backends[i])
			w.compute()
			return
		}
	}
	w.t.Fatalf("no backend %s", name)
}

func (w *fworld) health(name string, h failover.Health) {
	w.set(name, func(b *failover.Backend) { b.Health = h })
}

func (w *fworld) advance(d time.Duration) { w.now = w.now.Add(conntrack.TicksOf(d)) }

func (w *fworld) send(p pkt) string {
	w.t.Helper()
	d := w.snap.Decide(p.meta(), w.q, w.now)
	if d.Verdict != Tx {
		return fmt.Sprintf("%s:%s", d.Verdict, d.Reason)
	}
	return w.snap.Rules[0].Backends[d.Backend].Name
}

// spread sends one new TCP connection from each of n clients and counts
// where they went.
func (w *fworld) spread(n int) map[string]int {
	got := map[string]int{}
	for i, c := range clients(n) {
		got[w.send(tcp(c, uint16(1024+i%50000), syn))]++
	}
	return got
}

// only asserts that exactly the backends in want received traffic.
func only(t *testing.T, got map[string]int, want ...string) {
	t.Helper()
	wantSet := map[string]bool{}
	for _, n := range want {
		wantSet[n] = true
		if got[n] == 0 {
			t.Errorf("%s got no connection; spread %v", n, got)
		}
	}
	for n, c := range got {
		if !wantSet[n] && c > 0 {
			t.Errorf("%s got %d connections, want none; spread %v", n, c, got)
		}
	}
}

var (
	h = failover.HealthHealthy
	u = failover.HealthUnhealthy
)

func twoTierGroups() []failover.Group {
	return []failover.Group{
		{Name: "p", Role: failover.RolePrimary, CapacityScaler: 1},
		{Name: "f", Role: failover.RoleFailover, CapacityScaler: 1},
	}
}

func TestEligible_NoFailover_NoWeights(t *testing.T) {
	bs := []fb{{name: "192.0.2.1", health: h}, {name: "192.0.2.2", health: h}, {name: "192.0.2.3", health: u}}
	w := newFWorld(t, RuleConfig{Match: RuleMatch{Protocol: RuleTCP}}, failover.DefaultPolicy(), nil, bs)
	t.Run("healthy-backends", func(t *testing.T) { only(t, w.spread(600), "192.0.2.1", "192.0.2.2") })
	w.health("192.0.2.1", u)
	w.health("192.0.2.2", u)
	t.Run("none-healthy-all-backends", func(t *testing.T) { only(t, w.spread(600), "192.0.2.1", "192.0.2.2", "192.0.2.3") })
}

func TestEligible_NoFailover_WeightedMaglev(t *testing.T) {
	p := failover.DefaultPolicy()
	p.WeightedMaglev = true
	cfg := RuleConfig{Match: RuleMatch{Protocol: RuleTCP}}
	t.Run("set1-healthy-with-weight", func(t *testing.T) {
		w := newFWorld(t, cfg, p, nil, []fb{{name: "192.0.2.1", health: h, weight: 5}, {name: "192.0.2.2", health: h, weight: 0}, {name: "192.0.2.3", health: u, weight: 9}})
		only(t, w.spread(600), "192.0.2.1")
	})
	t.Run("set2-unhealthy-with-weight", func(t *testing.T) {
		w := newFWorld(t, cfg, p, nil, []fb{{name: "192.0.2.1", health: h, weight: 0}, {name: "192.0.2.2", health: u, weight: 3}, {name: "192.0.2.3", health: u, weight: 0}})
		only(t, w.spread(600), "192.0.2.2")
	})
	t.Run("set3-healthy-zero-weight-equal", func(t *testing.T) {
		w := newFWorld(t, cfg, p, nil, []fb{{name: "192.0.2.1", health: h, weight: 0}, {name: "192.0.2.2", health: h, weight: 0}, {name: "192.0.2.3", health: u, weight: 0}})
		got := w.spread(4000)
		only(t, got, "192.0.2.1", "192.0.2.2")
		if d := got["192.0.2.1"] - got["192.0.2.2"]; d > 400 || d < -400 {
			t.Errorf("equal weights gave %v", got)
		}
	})
	t.Run("set4-all-equal", func(t *testing.T) {
		w := newFWorld(t, cfg, p, nil, []fb{{name: "192.0.2.1", health: u, weight: 0}, {name: "192.0.2.2", health: u, weight: 0}})
		only(t, w.spread(600), "192.0.2.1", "192.0.2.2")
	})
	t.Run("weights-0-2-6-give-0-25-75", func(t *testing.T) {
		w := newFWorld(t, cfg, p, nil, []fb{{name: "192.0.2.1", health: h, weight: 0}, {name: "192.0.2.2", health: h, weight: 2}, {name: "192.0.2.3", health: h, weight: 6}})
		got := w.spread(20000)
		if got["192.0.2.1"] != 0 {
			t.Errorf("weight 0 got %d", got["192.0.2.1"])
		}
		if share := float64(got["192.0.2.3"]) / 20000; math.Abs(share-0.75) > 0.02 {
			t.Errorf("weight 6 of 8 got %.3f, want 0.75±0.02 (%v)", share, got)
		}
	})
	t.Run("weights-1-4-give-20-80", func(t *testing.T) {
		w := newFWorld(t, cfg, p, nil, []fb{{name: "192.0.2.1", health: h, weight: 1}, {name: "192.0.2.2", health: h, weight: 4}})
		got := w.spread(20000)
		if share := float64(got["192.0.2.1"]) / 20000; math.Abs(share-0.20) > 0.02 {
			t.Errorf("weight 1 of 5 got %.3f, want 0.20±0.02 (%v)", share, got)
		}
	})
	t.Run("missing-weight-header-counts-as-0", func(t *testing.T) {
		w := newFWorld(t, cfg, p, nil, []fb{{name: "192.0.2.1", health: h, weight: 5}, {name: "192.0.2.2", health: h, weight: 5}})
		w.set("192.0.2.2", func(b *failover.Backend) { b.WeightState = failover.WeightMissing })
		only(t, w.spread(600), "192.0.2.1")
	})
}

func TestEligible_Failover(t *testing.T) {
	cfg := RuleConfig{Match: RuleMatch{Protocol: RuleTCP}}
	prim := []fb{{name: "192.0.2.1", group: "p", health: h}, {name: "192.0.2.2", group: "p", health: h}, {name: "192.0.2.3", group: "f", health: h}, {name: "192.0.2.4", group: "f", health: h}}
	t.Run("ratio-0-primaries-while-one-is-healthy", func(t *testing.T) {
		w := newFWorld(t, cfg, failover.DefaultPolicy(), twoTierGroups(), prim)
		only(t, w.spread(600), "192.0.2.1", "192.0.2.2")
		w.health("192.0.2.1", u)
		only(t, w.spread(600), "192.0.2.2")
		w.health("192.0.2.2", u)
		only(t, w.spread(600), "192.0.2.3", "192.0.2.4")
	})
	t.Run("ratio-above-0-fails-over-below-ratio", func(t *testing.T) {
		p := failover.DefaultPolicy()
		p.FailoverRatio = 0.6
		w := newFWorld(t, cfg, p, twoTierGroups(), prim)
		only(t, w.spread(600), "192.0.2.1", "192.0.2.2")
		w.health("192.0.2.1", u) // 1/2 < 0.6
		only(t, w.spread(600), "192.0.2.3", "192.0.2.4")
	})
	t.Run("no-usable-failover-back-to-usable-primaries", func(t *testing.T) {
		p := failover.DefaultPolicy()
		p.FailoverRatio = 0.6
		w := newFWorld(t, cfg, p, twoTierGroups(), prim)
		w.health("192.0.2.3", u)
		w.health("192.0.2.4", u)
		w.health("192.0.2.1", u)
		only(t, w.spread(600), "192.0.2.2")
	})
	t.Run("drop-if-unhealthy-off-all-primaries", func(t *testing.T) {
		w := newFWorld(t, cfg, failover.DefaultPolicy(), twoTierGroups(), prim)
		for _, n := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"} {
			w.health(n, u)
		}
		only(t, w.spread(600), "192.0.2.1", "192.0.2.2")
	})
	t.Run("drop-if-unhealthy-on-drops-new-connections", func(t *testing.T) {
		p := failover.DefaultPolicy()
		p.DropTrafficIfUnhealthy = true
		w := newFWorld(t, cfg, p, twoTierGroups(), prim)
		for _, n := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"} {
			w.health(n, u)
		}
		only(t, w.spread(100), "drop:no-backend")
	})
	t.Run("weights-primaries-at-0-fail-over", func(t *testing.T) {
		p := failover.DefaultPolicy()
		p.WeightedMaglev = true
		ws := []fb{{name: "192.0.2.1", group: "p", health: h, weight: 0}, {name: "192.0.2.2", group: "p", health: h, weight: 0}, {name: "192.0.2.3", group: "f", health: h, weight: 10}, {name: "192.0.2.4", group: "f", health: h, weight: 30}}
		w := newFWorld(t, cfg, p, twoTierGroups(), ws)
		got := w.spread(8000)
		only(t, got, "192.0.2.3", "192.0.2.4")
		if share := float64(got["192.0.2.4"]) / 8000; math.Abs(share-0.75) > 0.03 {
			t.Errorf("failover weights 10:30 gave %v", got)
		}
	})
}

// establish opens n TCP connections (SYN then ACK) and returns where each went.
func (w *fworld) establish(n int, sport uint16) map[string]string {
	out := map[string]string{}
	for _, c := range clients(n) {
		b := w.send(tcp(c, sport, syn))
		w.send(tcp(c, sport, ack))
		out[c] = b
	}
	return out
}

// stayed counts the established connections that still reach their backend.
func (w *fworld) stayed(conns map[string]string, sport uint16) int {
	n := 0
	for c, b := range conns {
		if w.send(tcp(c, sport, ack)) == b {
			n++
		}
	}
	return n
}

func TestDrainingOnFailover(t *testing.T) {
	cfg := RuleConfig{Match: RuleMatch{Protocol: RuleTCP}}
	prim := []fb{{name: "192.0.2.1", group: "p", health: h}, {name: "192.0.2.2", group: "f", health: h}}
	for _, drain := range []bool{true, false} {
		t.Run(fmt.Sprintf("connection_drain_on_failover=%v", drain), func(t *testing.T) {
			p := failover.DefaultPolicy()
			p.ConnectionDrainOnFailover = drain
			p.FailoverDrainTimeout = 10 * time.Minute
			// The switch is caused by the primary's health; ALWAYS_PERSIST
			// keeps persistence out of the way so only the drain rule acts.
			cfg := cfg
			cfg.Persistence = failover.PersistAlways
			w := newFWorld(t, cfg, p, twoTierGroups(), prim)
			conns := w.establish(200, 5000)
			w.health("192.0.2.1", u) // switch to the failover side
			// Keep the connections busy (every 30 s, under the 60 s idle
			// timeout) through the 10 minute failover drain timeout.
			for elapsed := 30 * time.Second; elapsed < 10*time.Minute; elapsed += 30 * time.Second {
				w.advance(30 * time.Second)
				kept := w.stayed(conns, 5000)
				if drain && kept != 200 {
					t.Fatalf("draining on, %v after the switch: %d of 200 connections kept their backend", elapsed, kept)
				}
				if !drain && kept != 0 {
					t.Fatalf("draining off, %v after the switch: %d of 200 connections stayed on the old tier", elapsed, kept)
				}
			}
			w.advance(30 * time.Second)
			if kept := w.stayed(conns, 5000); kept != 0 {
				t.Errorf("%d connections still on the old tier after failover_drain_timeout", kept)
			}
		})
	}
}

func TestDrainingOnRemoval(t *testing.T) {
	for _, timeout := range []time.Duration{0, 5 * time.Second} {
		t.Run(fmt.Sprintf("connection_draining_timeout=%v", timeout), func(t *testing.T) {
			p := failover.DefaultPolicy()
			p.ConnectionDrainingTimeout = timeout
			w := newFWorld(t, RuleConfig{Match: RuleMatch{Protocol: RuleTCP}}, p, nil, []fb{{name: "192.0.2.1", health: h}, {name: "192.0.2.2", health: h}, {name: "192.0.2.3", health: h}})
			conns := w.establish(300, 6000)
			onRemoved := map[string]string{}
			for c, b := range conns {
				if b == "192.0.2.2" {
					onRemoved[c] = b
				}
			}
			w.set("192.0.2.2", func(b *failover.Backend) { b.Removed, b.RemovedAt = true, w.wall() })
			if got := w.spread(600)["192.0.2.2"]; got != 0 {
				t.Errorf("removed backend got %d new connections", got)
			}
			kept := w.stayed(onRemoved, 6000)
			if timeout == 0 && kept != 0 {
				t.Errorf("timeout 0: %d of %d connections still reach the removed backend", kept, len(onRemoved))
			}
			if timeout > 0 && kept != len(onRemoved) {
				t.Errorf("timeout %v: %d of %d connections kept during draining", timeout, kept, len(onRemoved))
			}
			w.advance(timeout + time.Second) // still under the 60 s idle timeout
			if kept := w.stayed(onRemoved, 6000); kept != 0 {
				t.Errorf("after the draining timeout %d connections still reach the removed backend", kept)
			}
			if others := w.stayed(without(conns, onRemoved), 6000); others != len(conns)-len(onRemoved) {
				t.Errorf("%d of %d connections on other backends kept them", others, len(conns)-len(onRemoved))
			}
		})
	}
}

// An entry records its backend's generations in 16 bits: a drain, an
// undrain and a second drain across generation 65536 (0 in an entry) keep
// their meaning on the packet path (failover's validity rule, wrap-safe).
func TestDrainingAcrossTheGenerationWrap(t *testing.T) {
	p := failover.DefaultPolicy()
	p.ConnectionDrainingTimeout = 5 * time.Second
	w := newFWorld(t, RuleConfig{Match: RuleMatch{Protocol: RuleTCP}}, p, nil, []fb{{name: "192.0.2.1", health: h}, {name: "192.0.2.2", health: h}})
	// As if every backend had departed and failed 65535 times already.
	aged := *w.st
	aged.Backends = slices.Clone(w.st.Backends)
	for i := range aged.Backends {
		b := &aged.Backends[i]
		b.UnhealthyGen, b.DrainGen, b.DrainFloor = 65535, 65535, 65535
	}
	w.st = &aged
	w.compute()
	const victim = "192.0.2.2"
	drain := func(on bool) {
		w.set(victim, func(b *failover.Backend) {
			b.Admin, b.DrainedAt = failover.AdminActive, time.Time{}
			if on {
				b.Admin, b.DrainedAt = failover.AdminDrained, w.wall()
			}
		})
	}
	onVictim := func(conns map[string]string) map[string]string {
		out := map[string]string{}
		for c, b := range conns {
			if b == victim {
				out[c] = b
			}
		}
		if len(out) == 0 {
			t.Fatal("no connection on the victim")
		}
		return out
	}
	before := onVictim(w.establish(200, 9000)) // stamped with drain generation 65535
	drain(true)                                // generation 65536: 0 in an entry
	if kept := w.stayed(before, 9000); kept != len(before) {
		t.Fatalf("during the drain across the wrap %d of %d connections kept their backend", kept, len(before))
	}
	w.advance(6 * time.Second) // past the deadline; the entries stay in the table
	drain(false)
	between := onVictim(w.establish(200, 9001)) // stamped with generation 0
	w.advance(time.Second)
	drain(true) // the floor moves to 0: generation 65535 is older
	if kept := w.stayed(between, 9001); kept != len(between) {
		t.Errorf("second drain: %d of %d connections of the undrained period kept their backend", kept, len(between))
	}
	if kept := w.stayed(before, 9000); kept != 0 {
		t.Errorf("second drain: %d of %d connections from before the first drain came back", kept, len(before))
	}
}

func without(all, minus map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range all {
		if _, ok := minus[k]; !ok {
			out[k] = v
		}
	}
	return out
}

// Persistence on unhealthy backends: every cell of the table of
// docs/design.md#persistence-on-unhealthy-backends.
func TestPersistence(t *testing.T) {
	type row struct {
		name     string
		policy   failover.PersistencePolicy
		mode     hash.TrackingMode
		affinity hash.Affinity
		proto    uint8
		persists bool
	}
	pc, ps := hash.PerConnection, hash.PerSession
	tests := []row{
		{"DEFAULT_FOR_PROTOCOL/PER_CONNECTION/TCP-persists", failover.PersistDefaultForProtocol, pc, hash.AffinityNone, packet.ProtoTCP, true},
		{"DEFAULT_FOR_PROTOCOL/PER_CONNECTION/CLIENT_IP/TCP-persists", failover.PersistDefaultForProtocol, pc, hash.AffinityClientIP, packet.ProtoTCP, true},
		{"DEFAULT_FOR_PROTOCOL/PER_CONNECTION/UDP-does-not", failover.PersistDefaultForProtocol, pc, hash.AffinityClientIP, packet.ProtoUDP, false},
		{"DEFAULT_FOR_PROTOCOL/PER_SESSION/NONE/TCP-persists", failover.PersistDefaultForProtocol, ps, hash.AffinityNone, packet.ProtoTCP, true},
		{"DEFAULT_FOR_PROTOCOL/PER_SESSION/CLIENT_IP_PORT_PROTO/TCP-persists", failover.PersistDefaultForProtocol, ps, hash.AffinityClientIPPortProto, packet.ProtoTCP, true},
		{"DEFAULT_FOR_PROTOCOL/PER_SESSION/CLIENT_IP/TCP-does-not", failover.PersistDefaultForProtocol, ps, hash.AffinityClientIP, packet.ProtoTCP, false},
		{"DEFAULT_FOR_PROTOCOL/PER_SESSION/CLIENT_IP_PROTO/UDP-does-not", failover.PersistDefaultForProtocol, ps, hash.AffinityClientIPProto, packet.ProtoUDP, false},
		{"NEVER_PERSIST/PER_CONNECTION/TCP-does-not", failover.PersistNever, pc, hash.AffinityNone, packet.ProtoTCP, false},
		{"NEVER_PERSIST/PER_SESSION/TCP-does-not", failover.PersistNever, ps, hash.AffinityNone, packet.ProtoTCP, false},
		{"ALWAYS_PERSIST/PER_CONNECTION/TCP-persists", failover.PersistAlways, pc, hash.AffinityNone, packet.ProtoTCP, true},
		{"ALWAYS_PERSIST/PER_CONNECTION/UDP-persists", failover.PersistAlways, pc, hash.AffinityClientIPProto, packet.ProtoUDP, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := RuleConfig{Match: RuleMatch{Protocol: RuleL3Default}, Persistence: tt.policy, Mode: tt.mode, Affinity: tt.affinity}
			bs := []fb{{name: "192.0.2.1", health: h}, {name: "192.0.2.2", health: h}, {name: "192.0.2.3", health: h}}
			w := newFWorld(t, cfg, failover.DefaultPolicy(), nil, bs)
			mk := func(c string) pkt {
				if tt.proto == packet.ProtoTCP {
					return tcp(c, 7000, ack)
				}
				return udp(c, 7000)
			}
			// Place flows, then make the backend of the first unhealthy.
			cs := clients(200)
			where := map[string]string{}
			for _, c := range cs {
				if tt.proto == packet.ProtoTCP {
					w.send(tcp(c, 7000, syn))
				}
				where[c] = w.send(mk(c))
			}
			victim := where[cs[0]]
			w.health(victim, u)
			moved, onVictim := 0, 0
			for _, c := range cs {
				if where[c] != victim {
					continue
				}
				onVictim++
				if w.send(mk(c)) != victim {
					moved++
				}
			}
			if tt.persists && moved != 0 {
				t.Errorf("%d of %d flows left the unhealthy backend; they should persist", moved, onVictim)
			}
			if !tt.persists && moved != onVictim {
				t.Errorf("%d of %d flows left the unhealthy backend; all should", moved, onVictim)
			}
		})
	}
	t.Run("ALWAYS_PERSIST/PER_SESSION/config-error", func(t *testing.T) {
		st, err := failover.Compute(failover.DefaultPolicy(), []failover.Group{{Name: "a", CapacityScaler: 1}}, nil, nil, epoch)
		if err != nil {
			t.Fatal(err)
		}
		_, err = BuildRule(RuleConfig{Name: "x", Persistence: failover.PersistAlways, Mode: hash.PerSession, TableSize: 65537}, st, 1, fakeClock{})
		if !errors.Is(err, failover.ErrAlwaysPersistPerSession) {
			t.Errorf("err = %v, want ErrAlwaysPersistPerSession", err)
		}
	})
}

// A backend that becomes healthy again does not remove replacement entries.
func TestReplacementEntriesSurviveRecovery(t *testing.T) {
	cfg := RuleConfig{Match: RuleMatch{Protocol: RuleTCP}, Persistence: failover.PersistNever}
	w := newFWorld(t, cfg, failover.DefaultPolicy(), nil, []fb{{name: "192.0.2.1", health: h}, {name: "192.0.2.2", health: h}})
	conns := w.establish(100, 8000)
	w.health("192.0.2.1", u)
	replaced := map[string]string{}
	for c, b := range conns {
		if b == "192.0.2.1" {
			nb := w.send(tcp(c, 8000, ack))
			if nb != "192.0.2.2" {
				t.Fatalf("flow of %s went to %s while its backend is unhealthy", c, nb)
			}
			replaced[c] = nb
		}
	}
	if len(replaced) == 0 {
		t.Fatal("no flow on 192.0.2.1")
	}
	w.health("192.0.2.1", h)
	if kept := w.stayed(replaced, 8000); kept != len(replaced) {
		t.Errorf("%d of %d replacement entries survived the old backend's recovery", kept, len(replaced))
	}
}

// zonalWorld is a TCP rule with zonal affinity (SPILL_CROSS_ZONE, ratio
// 0.5): clients 198.18.0.0/24 in zone a (backends 192.0.2.1-2, group
// ga), 198.18.1.0/24 in zone b (192.0.2.3-4, group gb), all healthy.
func zonalWorld(t *testing.T) *fworld {
	p := failover.DefaultPolicy()
	p.Zonal = failover.ZonalAffinity{Mode: failover.ZonalSpillCrossZone, SpilloverRatio: 0.5, Clients: []failover.ClientZone{
		{Prefix: netip.MustParsePrefix("198.18.0.0/24"), Zone: "a"},
		{Prefix: netip.MustParsePrefix("198.18.1.0/24"), Zone: "b"},
	}}
	groups := []failover.Group{{Name: "ga", Zone: "a", CapacityScaler: 1}, {Name: "gb", Zone: "b", CapacityScaler: 1}}
	bs := []fb{{name: "192.0.2.1", group: "ga", health: h}, {name: "192.0.2.2", group: "ga", health: h}, {name: "192.0.2.3", group: "gb", health: h}, {name: "192.0.2.4", group: "gb", health: h}}
	return newFWorld(t, RuleConfig{Match: RuleMatch{Protocol: RuleTCP}, ZoneClients: p.Zonal.Clients}, p, groups, bs)
}

// Zonal affinity: clients of a zone go to their zone's backends while it
// has enough usable ones, and spill over to the whole eligible set when not.
func TestZonalAffinity(t *testing.T) {
	w := zonalWorld(t)
	zoneA := map[string]int{}
	zoneB := map[string]int{}
	for i, c := range clients(512) {
		got := w.send(tcp(c, uint16(2000+i), syn))
		if i < 256 {
			zoneA[got]++
		} else {
			zoneB[got]++
		}
	}
	only(t, zoneA, "192.0.2.1", "192.0.2.2")
	only(t, zoneB, "192.0.2.3", "192.0.2.4")
	w.health("192.0.2.1", u)
	w.health("192.0.2.2", u)
	spill := map[string]int{}
	for i, c := range clients(256) {
		spill[w.send(tcp(c, uint16(9000+i), syn))]++
	}
	only(t, spill, "192.0.2.3", "192.0.2.4")
	other := map[string]int{}
	for i := range 200 {
		other[w.send(tcp(fmt.Sprintf("203.0.113.%d", i), 5, syn))]++
	}
	only(t, other, "192.0.2.3", "192.0.2.4") // no zone: the default eligible set
}
