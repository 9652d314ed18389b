package daemon

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/pkg/config"
)

// TestSimulateRemoveOneOfTen: removing one of ten backends moves about 10 %
// of the flows (the removed backend's) and under 1 % of the rest.
func TestSimulateRemoveOneOfTen(t *testing.T) {
	cfg, st := writeConfig(t, map[string]string{
		"web": webRule("", "[[group]]\nname = \"a\"\nbackends = "+backendList("192.0.2.", 1, 10)+"\n"),
		"api": vipRule("203.0.113.11", "", "[[group]]\nname = \"a\"\nbackends = [\"192.0.2.1\"]\n"),
	})
	res, err := Simulate(cfg, st, SimOptions{Rule: "web", Changes: []SimChange{{Kind: SimRemove, Addr: addr("192.0.2.4")}}, Flows: 200000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Rule != "web" || len(res[0].Backends) != 10 {
		t.Fatalf("result %+v", res)
	}
	r := res[0]
	for _, b := range r.Backends {
		sampled := float64(b.FlowsMoved) / float64(r.Flows)
		if b.Address == "192.0.2.4" {
			if b.MovedAway < 0.09 || b.MovedAway > 0.11 || b.MovedOwn != 1 || b.InAfter || b.After != 0 {
				t.Errorf("removed backend: %+v; want ~10%% of all flows moved, all of its own", b)
			}
			if math.Abs(sampled-b.MovedAway) > 0.005 {
				t.Errorf("removed backend: sampled %.4f moved, table says %.4f", sampled, b.MovedAway)
			}
			continue
		}
		if b.MovedAway >= 0.01 || sampled >= 0.01 {
			t.Errorf("survivor %s: %.2f%% of flows moved away (sampled %.2f%%), want < 1%%", b.Address, 100*b.MovedAway, 100*sampled)
		}
		if b.After < 0.105 || b.After > 0.117 {
			t.Errorf("survivor %s holds %.2f%% after, want ~11.1%%", b.Address, 100*b.After)
		}
	}
	if r.SurvivorMoved >= 0.01 || r.Moved < 0.09 || r.Moved > 0.12 {
		t.Errorf("moved %.2f%%, survivors %.2f%%", 100*r.Moved, 100*r.SurvivorMoved)
	}
	t.Logf("moved %.2f%% of flows (sampled %d of %d), survivors %.3f%%", 100*r.Moved, r.FlowsMoved, r.Flows, 100*r.SurvivorMoved)
	if r.TierBefore != "PRIMARY" || r.TierAfter != "PRIMARY" {
		t.Errorf("tiers %s → %s", r.TierBefore, r.TierAfter)
	}
}

func TestSimulateChanges(t *testing.T) {
	groups := "[[group]]\nname = \"a\"\nbackends = " + backendList("192.0.2.", 1, 4) + "\n[[group]]\nname = \"b\"\nrole = \"failover\"\nbackends = [\"192.0.2.9\"]\n"
	cfg, st := writeConfig(t, map[string]string{
		"web":  webRule("", groups),
		"wweb": strings.Replace(vipRule("203.0.113.12", "locality_lb_policy = \"WEIGHTED_MAGLEV\"", "[[group]]\nname = \"a\"\nbackends = "+backendList("192.0.2.", 1, 4)+"\n"), "TCP", "HTTP", 1),
	})
	find := func(r SimRule, a string) SimBackend {
		for _, b := range r.Backends {
			if b.Address == a {
				return b
			}
		}
		t.Fatalf("%s not in %+v", a, r.Backends)
		return SimBackend{}
	}

	// Add a fifth primary: ~20 % of flows move, all to the new one.
	res, err := Simulate(cfg, st, SimOptions{Rule: "web", Changes: []SimChange{{Kind: SimAdd, Addr: addr("192.0.2.5")}}})
	if err != nil {
		t.Fatal(err)
	}
	if nb := find(res[0], "192.0.2.5"); nb.InBefore || !nb.InAfter || nb.Gained < 0.18 || nb.Gained > 0.22 || res[0].Moved-nb.Gained > 0.01 {
		t.Errorf("add: %+v, moved %.3f", nb, res[0].Moved)
	}

	// Mark 3 of 4 primaries failover: the one primary left still serves
	// (ratio 0), the failover group never did.
	var cs []SimChange
	for _, a := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		cs = append(cs, SimChange{Kind: SimRole, Addr: addr(a), Role: config.RoleFailover})
	}
	res, err = Simulate(cfg, st, SimOptions{Rule: "web", Changes: cs})
	if err != nil {
		t.Fatal(err)
	}
	if b := find(res[0], "192.0.2.4"); b.After != 1 {
		t.Errorf("role: the remaining primary holds %.3f after", b.After)
	}
	if b := find(res[0], "192.0.2.9"); b.Before != 0 || b.After != 0 {
		t.Errorf("role: failover backend %+v", b)
	}

	// Weight 3 on one of four (the others weigh 1): it gets 50 %.
	res, err = Simulate(cfg, st, SimOptions{Rule: "wweb", Changes: []SimChange{{Kind: SimWeight, Addr: addr("192.0.2.1"), Weight: 3}}, Flows: 20000, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if b := find(res[0], "192.0.2.1"); math.Abs(b.After-0.5) > 0.01 || math.Abs(b.Before-0.25) > 0.01 {
		t.Errorf("weight: %+v", b)
	}

	// Mistakes are errors, not empty results.
	for _, tc := range []struct {
		opts SimOptions
		want string
	}{
		{SimOptions{Rule: "web", Changes: []SimChange{{Kind: SimWeight, Addr: addr("192.0.2.1"), Weight: 2}}}, "weights need WEIGHTED_MAGLEV"},
		{SimOptions{Rule: "web", Changes: []SimChange{{Kind: SimRemove, Addr: addr("192.0.2.77")}}}, "no such backend"},
		{SimOptions{Rule: "web", Changes: []SimChange{{Kind: SimAdd, Addr: addr("192.0.2.1")}}}, "already a backend"},
		{SimOptions{Rule: "nope", Changes: []SimChange{{Kind: SimRemove, Addr: addr("192.0.2.1")}}}, `no rule "nope"`},
		{SimOptions{Changes: []SimChange{{Kind: SimRemove, Addr: addr("192.0.2.77")}}}, "no rule has the backends"},
		{SimOptions{Rule: "web"}, "no change"},
	} {
		if _, err := Simulate(cfg, st, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.opts, err, tc.want)
		}
	}

	// Without --rule, a removal concerns every rule that has the backend.
	res, err = Simulate(cfg, st, SimOptions{Changes: []SimChange{{Kind: SimRemove, Addr: addr("192.0.2.2")}}})
	if err != nil || len(res) != 2 {
		t.Fatalf("both rules: %+v, %v", res, err)
	}
}

// TestSimulateTableSizeStep: without maglev_table_size, adding the 656th
// backend moves the rule's table from 65537 to 131101 slots; the
// comparison across the two sizes still splits the whole hash space.
func TestSimulateTableSizeStep(t *testing.T) {
	var bs []string
	for i := range 655 {
		bs = append(bs, fmt.Sprintf("%q", fmt.Sprintf("10.1.%d.%d", i/250, 1+i%250)))
	}
	cfg, st := writeConfig(t, map[string]string{"web": webRule("", "[[group]]\nname = \"a\"\nbackends = ["+strings.Join(bs, ", ")+"]\n")})
	for _, tc := range []struct {
		change        SimChange
		before, after uint32
		movedAtLeast  float64
	}{
		{SimChange{Kind: SimAdd, Addr: addr("10.1.9.9")}, 65537, 131101, 0.5},
		{SimChange{Kind: SimRemove, Addr: addr("10.1.0.1")}, 65537, 65537, 0.001},
	} {
		res, err := Simulate(cfg, st, SimOptions{Rule: "web", Changes: []SimChange{tc.change}})
		if err != nil {
			t.Fatal(err)
		}
		r := res[0]
		var before, after float64
		for _, b := range r.Backends {
			before, after = before+b.Before, after+b.After
		}
		if r.TableSizeBefore != tc.before || r.TableSize != tc.after || r.Moved < tc.movedAtLeast || math.Abs(before-1) > 1e-9 || math.Abs(after-1) > 1e-9 {
			t.Errorf("%v: sizes %d → %d, moved %.3f, shares %.6f → %.6f", tc.change.Kind, r.TableSizeBefore, r.TableSize, r.Moved, before, after)
		}
	}
}
