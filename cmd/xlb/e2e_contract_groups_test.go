package main

// Weights (docs/design.md#weights), zones, capacity and preferred groups
// (docs/design.md#zones-capacity-and-preferred-groups) and full tables
// (docs/design.md#full-tables-and-floods) on real packets, driven through
// health checks, reloads and timers.

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// shareIn reports whether backend i served between lo and hi of res.
func shareIn(res lab.DriveResult, i int, lo, hi float64) bool {
	total := 0
	for _, n := range res.PerBackend {
		total += n
	}
	s := float64(res.PerBackend[i]) / float64(max(total, 1))
	return s >= lo && s <= hi
}

// Weight shares (docs/design.md#weights): all weights 0 gives equal shares; a
// missing or invalid weight header is weight 0 with its state shown and
// health unaffected; an open connection stays on a backend whose weight drops
// to 0.
func TestWireWeightShares(t *testing.T) {
	wireTest(t)
	l := labWith(t, lab.Options{Backends: 3})
	for _, b := range l.Backends {
		b.SetWeight(0)
	}
	x := xlbIn(t, l, []lab.Rule{rule(l, "web4", "locality_lb_policy = \"WEIGHTED_MAGLEV\"\n")})
	waitHealth(t, l, x, "web4", "HEALTHY", 0, 1, 2)
	res := driveFor(t, l, 300, 4, 3*time.Second)
	for i := range 3 {
		if !res.OK() || !shareIn(res, i, 0.2, 0.47) {
			t.Errorf("all weights 0: %s; want equal shares", describe(res))
			break
		}
	}

	l.Backends[0].SetWeight(-1)
	l.Backends[1].SetWeightText("abc")
	l.Backends[2].SetWeight(5)
	addr := func(i int) string { return l.Backends[i].Tunnel4.String() }
	testutil.WaitFor(t, 30*time.Second, "weight states", func() (bool, string) {
		st := x.status(t)
		b0, b1, b2 := backendOf(st, "web4", addr(0)), backendOf(st, "web4", addr(1)), backendOf(st, "web4", addr(2))
		ok := b0.WeightState == "MISSING_WEIGHT" && b1.WeightState == "INVALID_WEIGHT" && b2.WeightState == "OK" &&
			strings.HasPrefix(b0.Health, "HEALTHY") && strings.HasPrefix(b1.Health, "HEALTHY") && b0.WeightEffective == 0 && b1.WeightEffective == 0
		return ok, fmt.Sprintf("%s/%s/%d %s/%s/%d %s/%s", b0.WeightState, b0.Health, b0.WeightEffective, b1.WeightState, b1.Health, b1.WeightEffective, b2.WeightState, b2.Health)
	})
	if res := driveFor(t, l, 60, 4, 3*time.Second); !onlyOn(res, 2) {
		t.Errorf("missing and invalid weights: %s; want everything on be2", describe(res))
	}
	out, _, err := xlbCtl(t, x.Socket(), 2, "backend", "list", "--rule", "web4", "--json")
	if err != nil || !strings.Contains(out, `"weight_state": "MISSING_WEIGHT"`) || !strings.Contains(out, `"weight_state": "INVALID_WEIGHT"`) {
		t.Errorf("xlb backend list --json does not show the weight states: %v\n%s", err, out)
	}

	for _, b := range l.Backends {
		b.SetWeight(1)
	}
	testutil.WaitFor(t, 30*time.Second, "weights 1:1:1", func() (bool, string) {
		res := driveFor(t, l, 60, 4, 3*time.Second)
		return onlyOn(res, 0, 1, 2), describe(res)
	})
	k := connOn(t, l, 4, 2, 0)
	l.Backends[2].SetWeight(0)
	testutil.WaitFor(t, 30*time.Second, "be2 at weight 0 takes no new connection", func() (bool, string) {
		res := driveFor(t, l, 60, 4, 3*time.Second)
		return onlyOn(res, 0, 1), describe(res)
	})
	if b := k.on(); b != 2 {
		t.Errorf("open connection on be2 went to %d when its weight dropped to 0; want it kept", b)
	}
}

// from sends one request from each of srcs to vip and counts the
// backends that answered (-1: failures).
func from(l *lab.Lab, vip netip.Addr, srcs []netip.Addr) map[int]int {
	out := map[int]int{}
	for _, src := range srcs {
		out[requests(l, src, vip, 1)[0]]++
	}
	return out
}

// only reports whether got has answers from the backends idx and no other
// (and no failure).
func only(got map[int]int, idx ...int) bool {
	n := 0
	for _, i := range idx {
		n += got[i]
	}
	total := 0
	for _, c := range got {
		total += c
	}
	return n == total && total > 0
}

// Beyond the seeds (docs/design.md#zones-capacity-and-preferred-groups):
// zonal affinity by client prefix (SPILL_CROSS_ZONE
// spills a zone with no healthy backend, STAY_WITHIN_ZONE falls back to
// the zone's own backends), the capacity scaler (shares, and 0 by reload:
// no new connections, open ones stay), preferred groups (used until
// unusable), auto capacity drain (a group below 25 % healthy takes no new
// connections; back after ≥ 35 % for 60 s).
func TestWireBeyondTheSeeds(t *testing.T) {
	wireTest(t)
	concurrently(t, wireCase{"zonal affinity", func(t *testing.T) {
		l := labWith(t, lab.Options{Backends: 4})
		zones := []lab.Group{group("za", "zone = \"a\"\n", 0, 1), group("zb", "zone = \"b\"\n", 2, 3)}
		zonal := func(mode, a, b string) string {
			return fmt.Sprintf("[zonal_affinity]\nmode = %q\n[zonal_affinity.clients]\na = [%q]\nb = [%q]\n", mode, a, b)
		}
		x := xlbIn(t, l, []lab.Rule{
			rule(l, "web4", zonal("ZONAL_AFFINITY_SPILL_CROSS_ZONE", "198.51.100.0/25", "198.51.100.128/25"), zones...),
			rule(l, "web6", zonal("ZONAL_AFFINITY_STAY_WITHIN_ZONE", "fd00:51::/121", "fd00:51::80/121"), zones...),
		})
		for _, r := range []string{"web4", "web6"} {
			waitHealth(t, l, x, r, "HEALTHY", 0, 1, 2, 3)
		}
		// Client i is .2+i / ::2+i: zone a below index 126, zone b from it.
		a4, b4 := l.ClientAddrs4[0:30], l.ClientAddrs4[130:160]
		a6, b6 := l.ClientAddrs6[0:30], l.ClientAddrs6[130:160]
		for _, c := range []struct {
			name string
			vip  netip.Addr
			srcs []netip.Addr
			want []int
		}{{"IPv4 zone a", l.Opts.VIP4, a4, []int{0, 1}}, {"IPv4 zone b", l.Opts.VIP4, b4, []int{2, 3}}, {"IPv6 zone a", l.Opts.VIP6, a6, []int{0, 1}}, {"IPv6 zone b", l.Opts.VIP6, b6, []int{2, 3}}} {
			if got := from(l, c.vip, c.srcs); !only(got, c.want...) || len(got) != 2 {
				t.Errorf("%s clients: %v; want both of be%v only", c.name, got, c.want)
			}
		}
		l.Backends[0].SetHealthy(false)
		l.Backends[1].SetHealthy(false)
		waitHealth(t, l, x, "web4", "UNHEALTHY", 0, 1)
		waitHealth(t, l, x, "web6", "UNHEALTHY", 0, 1)
		if got := from(l, l.Opts.VIP4, a4); !only(got, 2, 3) {
			t.Errorf("SPILL_CROSS_ZONE, zone a without a healthy backend: %v; want zone b's be2/be3", got)
		}
		if got := from(l, l.Opts.VIP6, a6); !only(got, 0, 1) {
			t.Errorf("STAY_WITHIN_ZONE, zone a without a healthy backend: %v; want zone a's own be0/be1", got)
		}
		if got := from(l, l.Opts.VIP6, b6); !only(got, 2, 3) {
			t.Errorf("STAY_WITHIN_ZONE, zone b: %v; want be2/be3", got)
		}
	}}, wireCase{"capacity and preferred groups", func(t *testing.T) {
		l := labWith(t, lab.Options{Backends: 3})
		capacity := []lab.Group{group("full", "", 0), group("half", "capacity_scaler = 0.5\n", 1)}
		rules := []lab.Rule{
			rule(l, "web4", "", capacity...),
			rule(l, "web6", "", group("pref", "preferred = true\n", 0, 1), group("rest", "", 2)),
		}
		x := xlbIn(t, l, rules)
		waitHealth(t, l, x, "web4", "HEALTHY", 0, 1)
		waitHealth(t, l, x, "web6", "HEALTHY", 0, 1, 2)
		res := driveFor(t, l, 300, 4, 3*time.Second)
		if !res.OK() || !shareIn(res, 0, 0.55, 0.78) {
			t.Errorf("capacity scalers 1 and 0.5: %s; want about 2:1", describe(res))
		}
		if res := driveFor(t, l, 60, 6, 3*time.Second); !onlyOn(res, 0, 1) {
			t.Errorf("preferred group: %s; want be0/be1 only", describe(res))
		}

		k := connOn(t, l, 4, 1, 0)
		rules[0].Groups[1].Extra = "capacity_scaler = 0.0\n"
		reloadWith(t, l, x, rules)
		if res := driveFor(t, l, 60, 4, 3*time.Second); !onlyOn(res, 0) {
			t.Errorf("capacity_scaler 0: %s; want no new connection on be1", describe(res))
		}
		if b := k.on(); b != 1 {
			t.Errorf("open connection on be1 went to %d at capacity 0; want it kept", b)
		}

		l.Backends[0].SetHealthy(false)
		l.Backends[1].SetHealthy(false)
		testutil.WaitFor(t, 30*time.Second, "preferred group unusable: the rest", func() (bool, string) {
			res := driveFor(t, l, 40, 6, 3*time.Second)
			return onlyOn(res, 2), describe(res)
		})
	}}, wireCase{"auto capacity drain", func(t *testing.T) {
		l := labWith(t, lab.Options{Backends: 7})
		x := xlbIn(t, l, []lab.Rule{rule(l, "web4", "auto_capacity_drain = true\n", group("g1", "", 0, 1, 2, 3, 4), group("g2", "", 5, 6))})
		waitHealth(t, l, x, "web4", "HEALTHY", 0, 1, 2, 3, 4, 5, 6)
		for i := range 4 {
			l.Backends[i].SetHealthy(false)
		}
		testutil.WaitFor(t, 30*time.Second, "g1 at 1 of 5 healthy is drained: its healthy be4 takes nothing", func() (bool, string) {
			res := driveFor(t, l, 60, 4, 3*time.Second)
			return onlyOn(res, 5, 6), describe(res)
		})
		recovered := time.Now() // g1 at 2 of 5 (40 % ≥ 35 %) from a little later
		l.Backends[0].SetHealthy(true)
		waitHealth(t, l, x, "web4", "HEALTHY", 0)
		if res := driveFor(t, l, 60, 4, 3*time.Second); !onlyOn(res, 5, 6) {
			t.Errorf("g1 back at 40 %% healthy, before the 60 s hold: %s; want still drained", describe(res))
		}
		var drained, undrained time.Time
		testutil.WaitFor(t, 90*time.Second, "g1 undrained after the hold", func() (bool, string) {
			time.Sleep(time.Second)
			for _, e := range x.status(t).Events {
				switch {
				case e.Group != "g1":
				case e.Kind == "GROUP_AUTO_DRAINED":
					drained = e.At
				case e.Kind == "GROUP_AUTO_UNDRAINED":
					undrained = e.At
				}
			}
			return !undrained.IsZero(), fmt.Sprint(time.Since(recovered).Round(time.Second))
		})
		if drained.IsZero() || undrained.Sub(recovered) < 55*time.Second { // the daemon stamps events with its own clock
			t.Errorf("g1 drained at %v, undrained %v after it recovered; want the 60 s hold", drained, undrained.Sub(recovered))
		}
		if res := driveFor(t, l, 60, 4, 3*time.Second); !onlyOn(res, 0, 4, 5, 6) {
			t.Errorf("g1 undrained: %s; want be0 and be4 back beside g2", describe(res))
		}
	}})
}

// Table full (docs/design.md#full-tables-and-floods): with max_entries 1024
// (512 per queue) the flows of a flood of new connections no longer all find
// a slot; those that do not are forwarded by Maglev without an entry (every
// request is answered) and counted as insert failures, while established
// connections that keep sending keep their entries: after a backend joins,
// none of them moves.
func TestWireTableFull(t *testing.T) {
	wireTest(t)
	l := labWith(t, lab.Options{Backends: 4, ClientAddrs: 1000})
	l.Backends[3].SetHealthy(false)
	rules := []lab.Rule{rule(l, "web4", "")}
	dir := t.TempDir()
	cfg, err := l.WriteConfig(dir, rules)
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	small := strings.Replace(string(text), "max_entries = 262144", "max_entries = 1024", 1)
	if small == string(text) {
		t.Fatal("the lab's xlb.toml has no max_entries to shrink")
	}
	if err := os.WriteFile(cfg, []byte(small), 0o644); err != nil {
		t.Fatal(err)
	}
	x := xlbRun(t, l, dir, cfg)
	waitHealth(t, l, x, "web4", "HEALTHY", 0, 1, 2)

	keep, where := openKeeps(t, l, l.ClientAddrs4[:20])
	stop := make(chan struct{})
	done := make(chan int)
	go func() { // the established connections keep sending during the flood
		moved := 0
		for {
			select {
			case <-stop:
				done <- moved
				return
			case <-time.After(200 * time.Millisecond):
			}
			for _, k := range keep {
				if k.on() != where[k] {
					moved++
				}
			}
		}
	}()
	res := driveFor(t, l, 3000, 4, 5*time.Second)
	close(stop)
	if moved := <-done; moved > 0 {
		t.Errorf("%d answers on established connections came from another backend during the flood", moved)
	}
	if !res.OK() {
		t.Errorf("flood of 3000 connections into a table of 1024: %s; want every one answered", describe(res))
	}
	failures := metricSum(scrape(t, l), `xlb_conntrack_events_total{event="insert_failure",queue="0"}`) +
		metricSum(scrape(t, l), `xlb_conntrack_events_total{event="insert_failure",queue="1"}`)
	if failures == 0 {
		t.Errorf("3000 new connections into a table of 1024 counted no insert failure")
	}
	t.Logf("insert failures: %.0f", failures)

	l.Backends[3].SetHealthy(true)
	waitHealth(t, l, x, "web4", "HEALTHY", 3)
	for _, k := range keep {
		if b := k.on(); b != where[k] {
			t.Errorf("established connection on be%d went to %d after be3 joined: its entry was lost", where[k], b)
		}
	}
}
