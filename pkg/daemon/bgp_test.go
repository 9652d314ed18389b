package daemon

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/dataplane"
)

func TestDecideVIP(t *testing.T) {
	vip := addr("203.0.113.10")
	other := addr("203.0.113.20")
	rule := func(name string, v netip.Addr, tier failover.Tier, eligible int, warm bool, pending int) *ruleStatus {
		return &ruleStatus{Name: name, VIP: v, Tier: tier.String(), State: &failover.State{Tier: tier}, Eligible: eligible, Warm: warm, Pending: make([]netip.Addr, pending)}
	}
	for _, tc := range []struct {
		name    string
		rules   []*ruleStatus
		drained bool
		want    bool
		reason  string
		held    string // the fleet's hold
	}{
		{"serving", []*ruleStatus{rule("web", vip, failover.TierPrimary, 3, true, 0)}, false, true, "serving (web: PRIMARY, 3 eligible)", ""},
		{"drained", []*ruleStatus{rule("web", vip, failover.TierPrimary, 3, true, 0)}, true, false, "appliance drained (xlb appliance drain)", ""},
		{"cold rule", []*ruleStatus{rule("web", vip, failover.TierPrimary, 3, true, 0), rule("udp", vip, failover.TierLastResort, 3, false, 2)}, false, false,
			"first round of health checks not finished: udp (2 backends without a verdict)", ""},
		{"last resort", []*ruleStatus{rule("web", vip, failover.TierLastResort, 3, true, 0)}, false, false,
			"no rule can place a new flow on a usable backend (web: LAST_RESORT)", ""},
		{"empty", []*ruleStatus{rule("web", vip, failover.TierEmpty, 0, true, 0)}, false, false,
			"no rule can place a new flow on a usable backend (web: EMPTY)", ""},
		{"one of two rules places", []*ruleStatus{rule("web", vip, failover.TierEmpty, 0, true, 0), rule("udp", vip, failover.TierFailover, 1, true, 0)}, false, true,
			"serving (udp: FAILOVER, 1 eligible)", ""},
		{"other VIP's rules do not count", []*ruleStatus{rule("web", vip, failover.TierEmpty, 0, true, 0), rule("api", other, failover.TierPrimary, 2, true, 0)}, false, false,
			"no rule can place a new flow on a usable backend (web: EMPTY)", ""},
		{"fleet joining", []*ruleStatus{rule("web", vip, failover.TierPrimary, 3, true, 0)}, false, false, "fleet join under way", "fleet join under way"},
		{"drained while joining", []*ruleStatus{rule("web", vip, failover.TierPrimary, 3, true, 0)}, true, false, "appliance drained (xlb appliance drain)", "fleet join under way"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := decideVIP(tc.rules, vip, tc.drained, tc.held)
			if got != tc.want || why != tc.reason {
				t.Errorf("decideVIP = %v, %q; want %v, %q", got, why, tc.want, tc.reason)
			}
		})
	}
}

func TestWarmDeadline(t *testing.T) {
	hc := config.DefaultRule().HealthCheck // 5 s interval and timeout, thresholds 2/2
	hc.Type = config.HealthHTTP
	if got, want := warmDeadline(hc), 5*time.Second+2*(5500*time.Millisecond+5*time.Second)+time.Second; got != want {
		t.Errorf("warmDeadline = %v, want %v", got, want)
	}
	hc.Type = config.HealthNone
	if got := warmDeadline(hc); got != 0 {
		t.Errorf("NONE: %v", got)
	}
}

// TestWarmCheck: a rule is warm when every backend has a verdict, not
// merely a first report (a weight change while still UNKNOWN).
func TestWarmCheck(t *testing.T) {
	cfg, st := writeConfig(t, map[string]string{"web": webRule("", "[[group]]\nname = \"a\"\nbackends = [\"192.0.2.1\", \"192.0.2.2\"]\n")})
	d := &daemon{cfg: cfg, state: st, view: config.Apply(cfg, st), probes: map[probeKey]probe{}}
	rv := &d.view.Rules[0]
	rt := &ruleRuntime{}
	now := time.Now()
	warm, pending := d.warmCheck(rv, rt, now)
	if warm || len(pending) != 2 {
		t.Fatalf("no probes: warm %v pending %v", warm, pending)
	}
	d.probes[probeKey{"web", addr("192.0.2.1")}] = probe{health: failover.HealthHealthy}
	d.probes[probeKey{"web", addr("192.0.2.2")}] = probe{health: failover.HealthUnknown, weightState: failover.WeightOK}
	if warm, pending = d.warmCheck(rv, rt, now); warm || len(pending) != 1 || pending[0] != addr("192.0.2.2") {
		t.Fatalf("one verdict: warm %v pending %v", warm, pending)
	}
	d.probes[probeKey{"web", addr("192.0.2.2")}] = probe{health: failover.HealthUnhealthy}
	if warm, pending = d.warmCheck(rv, rt, now); !warm || len(pending) != 0 {
		t.Fatalf("both verdicts: warm %v pending %v", warm, pending)
	}
	// The deadline makes a rule warm without every verdict.
	delete(d.probes, probeKey{"web", addr("192.0.2.2")})
	rt.warm.since = now.Add(-warmDeadline(rv.Rule.HealthCheck))
	if warm, _ = d.warmCheck(rv, rt, now); !warm {
		t.Fatal("deadline passed, still cold")
	}
}

func TestCheckBGPReload(t *testing.T) {
	base := &config.BGP{LocalAS: 65001, HoldTime: 3 * time.Second, MED: 0}
	same := *base
	same.MED, same.Peers = 5, []config.BGPPeer{{Address: addr("192.0.2.1"), PeerAS: 65000}}
	if err := checkBGPReload(base, &same); err != nil {
		t.Errorf("attributes and peers must reload live: %v", err)
	}
	if err := checkBGPReload(nil, base); err != nil {
		t.Errorf("adding [bgp]: %v", err)
	}
	changed := *base
	changed.LocalAS, changed.HoldTime = 65002, 9*time.Second
	err := checkBGPReload(base, &changed)
	if err == nil || !strings.Contains(err.Error(), "bgp.local_as, bgp.hold_time cannot change while running") {
		t.Errorf("identity change: %v", err)
	}
}

type fixedClock struct{}

func (fixedClock) Ticks(time.Time) conntrack.Time { return 0 }

// TestTableDigest: the digest follows the table and the seed, not the
// appliance-local backend slots.
func TestTableDigest(t *testing.T) {
	build := func(seed uint64, ids []uint32, names ...string) *dataplane.Rule {
		t.Helper()
		var groups = []failover.Group{{Name: "a", CapacityScaler: 1}}
		var bs []failover.Backend
		for i, n := range names {
			bs = append(bs, failover.Backend{Name: n, ID: ids[i], Group: "a", Health: failover.HealthHealthy})
		}
		st, err := failover.Compute(failover.DefaultPolicy(), groups, bs, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		r, err := dataplane.BuildRule(dataplane.RuleConfig{Name: "web", TableSize: 251}, st, seed, fixedClock{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := build(1, []uint32{0, 1, 2}, "192.0.2.1", "192.0.2.2", "192.0.2.3")
	b := build(1, []uint32{7, 3, 5}, "192.0.2.1", "192.0.2.2", "192.0.2.3") // another appliance's slots
	da, db := tableDigest(1, a), tableDigest(1, b)
	if da != db || len(da) != 16 {
		t.Errorf("same tables, other slots: %s vs %s", da, db)
	}
	if d := tableDigest(2, a); d == da {
		t.Error("the seed does not change the digest")
	}
	c := build(2, []uint32{0, 1, 2}, "192.0.2.1", "192.0.2.2", "192.0.2.3") // tables built with another seed
	if d := tableDigest(1, c); d == da {
		t.Error("a table built with another seed has the same digest")
	}
	e := build(1, []uint32{0, 1}, "192.0.2.1", "192.0.2.2")
	if d := tableDigest(1, e); d == da {
		t.Error("another eligible set has the same digest")
	}
}

// TestBGPPeersBFD: bfd = true gives the speaker's peer [bgp.bfd]'s timers;
// a timer change makes a different peer, which SetPeers re-adds (the
// reload applies it).
func TestBGPPeersBFD(t *testing.T) {
	c := &config.BGP{BFD: config.DefaultBFDTimers(), Peers: []config.BGPPeer{
		{Address: addr("192.0.2.1"), PeerAS: 65000, BFD: true},
		{Address: addr("2001:db8::1"), PeerAS: 65000},
	}}
	ps := bgpPeers(c)
	if b := ps[0].BFD; b.MinTx != 100*time.Millisecond || b.MinRx != 100*time.Millisecond || b.Multiplier != 3 {
		t.Errorf("peer with bfd = true: %+v", b)
	}
	if ps[1].BFD.Enabled() {
		t.Errorf("peer without bfd runs BFD: %+v", ps[1].BFD)
	}
	c2 := *c
	c2.BFD.Multiplier = 5
	if ps2 := bgpPeers(&c2); ps2[0] == ps[0] || ps2[1] != ps[1] {
		t.Errorf("multiplier change: BFD peer unchanged or other peer changed: %+v / %+v", ps2, ps)
	}
}
