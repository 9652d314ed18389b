package main

// Eligible backends with failover groups and draining on failover
// (docs/design.md#eligible-backends, docs/design.md#draining-on-failover) on
// real packets: primaries fail their health checks with connections open.

import (
	"fmt"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// tierSwitch returns the time of the last tier switch of rule to tier to.
func tierSwitch(st control.Status, rule, to string) (time.Time, bool) {
	var at time.Time
	for _, e := range st.Events {
		if e.Rule == rule && e.Kind == "TIER_SWITCH" && e.To == to {
			at = e.At
		}
	}
	return at, !at.IsZero()
}

// Draining on failover (docs/design.md#draining-on-failover): with
// connection_drain_on_failover (default) open
// connections stay on the primaries after the switch, until
// failover_drain_timeout ends them; failback waits failback_delay and keeps
// the connections opened on the failover backends. Without it the switch
// flushes them, and with nothing healthy (drop_traffic_if_unhealthy false)
// new connections go to the primaries.
func TestWireDrainingOnFailover(t *testing.T) {
	wireTest(t)
	groups := func() []lab.Group {
		return []lab.Group{group("p", "", 0, 1), group("f", "role = \"failover\"\n", 2, 3)}
	}
	// start brings the primaries up before the failover backends: at start
	// every backend is UNKNOWN, and failover backends passing their first
	// check before the primaries would make a switch (and failover
	// departures) of their own.
	start := func(t *testing.T, l *lab.Lab, x *labXLB, failover ...int) {
		t.Helper()
		waitHealth(t, l, x, "web4", "HEALTHY", 0, 1)
		for _, i := range failover {
			l.Backends[i].SetHealthy(true)
		}
		waitHealth(t, l, x, "web4", "HEALTHY", failover...)
	}
	concurrently(t, wireCase{"drain", func(t *testing.T) {
		const drainTimeout, failback = 10 * time.Second, 5 * time.Second
		l := labWith(t, lab.Options{Backends: 4})
		l.Backends[2].SetHealthy(false)
		l.Backends[3].SetHealthy(false)
		x := xlbIn(t, l, []lab.Rule{rule(l, "web4", fmt.Sprintf("[failover]\nfailover_drain_timeout = %q\nfailback_delay = %q\n", drainTimeout, failback), groups()...)})
		start(t, l, x, 2, 3)
		testutil.WaitFor(t, 30*time.Second, "primaries serve", func() (bool, string) {
			res := driveFor(t, l, 40, 4, 3*time.Second)
			return onlyOn(res, 0, 1), describe(res)
		})
		k0, k1 := connOn(t, l, 4, 0, 0), connOn(t, l, 4, 1, 50)

		l.Backends[0].SetHealthy(false)
		l.Backends[1].SetHealthy(false)
		// Look at the open connections as soon as status shows the
		// switch, well inside the drain.
		var switched time.Time
		var until *time.Time
		testutil.WaitFor(t, 30*time.Second, "switch to FAILOVER", func() (bool, string) {
			st := x.status(t)
			var ok bool
			switched, ok = tierSwitch(st, "web4", "FAILOVER")
			until = backendOf(st, "web4", l.Backends[0].Tunnel4.String()).DrainUntil
			return ok && until != nil, ruleStatus(t, st, "web4").Tier
		})
		if until.Sub(switched) != drainTimeout {
			t.Fatalf("be0 drains until %v, switch at %v: want the switch + %v", until, switched, drainTimeout)
		}
		asked := time.Now()
		if a, b := k0.on(), k1.on(); (a != 0 || b != 1) && asked.Before(until.Add(-time.Second)) {
			t.Errorf("open connections %v after the switch went to %d and %d; want 0 and 1 (drained on failover)", asked.Sub(switched), a, b)
		}
		testutil.WaitFor(t, 30*time.Second, "new connections on the failover backends", func() (bool, string) {
			res := driveFor(t, l, 40, 4, 3*time.Second)
			return onlyOn(res, 2, 3), describe(res)
		})
		time.Sleep(time.Until(until.Add(1500 * time.Millisecond)))
		if a := k0.on(); a == 0 {
			t.Errorf("open connection still on be0 after failover_drain_timeout")
		}

		// Failback: new connections stay on the failover side for
		// failback_delay after the primaries pass again; a connection opened
		// there keeps its backend across the failback.
		k2 := connOn(t, l, 4, 2, 100)
		healthyAt := time.Now()
		l.Backends[0].SetHealthy(true)
		l.Backends[1].SetHealthy(true)
		waitHealth(t, l, x, "web4", "HEALTHY", 0, 1)
		before := ruleStatus(t, x.status(t), "web4").Tier
		res := driveFor(t, l, 20, 4, 3*time.Second)
		after := ruleStatus(t, x.status(t), "web4").Tier
		if before == "FAILOVER" && after == "FAILOVER" && !noneOn(res, 0, 1) {
			t.Errorf("while failback is pending: %s; want nothing on the primaries", describe(res))
		}
		testutil.WaitFor(t, 30*time.Second, "failback to the primaries", func() (bool, string) {
			res := driveFor(t, l, 40, 4, 3*time.Second)
			return onlyOn(res, 0, 1), describe(res)
		})
		back, ok := tierSwitch(x.status(t), "web4", "PRIMARY")
		if !ok || back.Sub(healthyAt) < failback {
			t.Errorf("failback at %v, %v after the primaries were made healthy; want ≥ failback_delay %v", back, back.Sub(healthyAt), failback)
		}
		if b := k2.on(); b != 2 {
			t.Errorf("connection opened on be2 during failover went to %d after the failback; want 2", b)
		}
	}}, wireCase{"flush", func(t *testing.T) {
		l := labWith(t, lab.Options{Backends: 4})
		l.Backends[2].SetHealthy(false)
		l.Backends[3].SetHealthy(false)
		x := xlbIn(t, l, []lab.Rule{rule(l, "web4", "[failover]\nconnection_drain_on_failover = false\n", groups()...)})
		start(t, l, x, 2, 3)
		testutil.WaitFor(t, 30*time.Second, "primaries serve", func() (bool, string) {
			res := driveFor(t, l, 40, 4, 3*time.Second)
			return onlyOn(res, 0, 1), describe(res)
		})
		k0 := connOn(t, l, 4, 0, 0)
		l.Backends[0].SetHealthy(false)
		l.Backends[1].SetHealthy(false)
		testutil.WaitFor(t, 30*time.Second, "new connections on the failover backends", func() (bool, string) {
			res := driveFor(t, l, 40, 4, 3*time.Second)
			return onlyOn(res, 2, 3), describe(res)
		})
		if a := k0.on(); a == 0 {
			t.Errorf("open connection still on be0 after a switch without draining on failover")
		}
		// Nothing healthy, drop_traffic_if_unhealthy false: last resort is
		// every primary.
		l.Backends[2].SetHealthy(false)
		l.Backends[3].SetHealthy(false)
		testutil.WaitFor(t, 30*time.Second, "nothing healthy: new connections on the primaries", func() (bool, string) {
			res := driveFor(t, l, 40, 4, 3*time.Second)
			return onlyOn(res, 0, 1), describe(res)
		})
	}})
}

// Eligible backends with failover groups (docs/design.md#eligible-backends):
// the primaries are used while
// usable/all ≥ ratio (0.75: 3 of 4 stays, 2 of 4 fails over), then the
// failover backends, then the usable primaries below the ratio when no
// failover backend is usable, and with nothing usable and
// drop_traffic_if_unhealthy new connections are dropped.
func TestWireEligibleBackendsFailover(t *testing.T) {
	wireTest(t)
	l := labWith(t, lab.Options{Backends: 5})
	l.Backends[4].SetHealthy(false) // no start-up switch (TestWireDrainingOnFailover)
	x := xlbIn(t, l, []lab.Rule{rule(l, "web4", "[failover]\nratio = 0.75\ndrop_traffic_if_unhealthy = true\n",
		group("p", "", 0, 1, 2, 3), group("f", "role = \"failover\"\n", 4))})
	waitHealth(t, l, x, "web4", "HEALTHY", 0, 1, 2, 3)
	l.Backends[4].SetHealthy(true)
	waitHealth(t, l, x, "web4", "HEALTHY", 4)
	serves := func(what string, idx ...int) {
		t.Helper()
		testutil.WaitFor(t, 30*time.Second, what, func() (bool, string) {
			res := driveFor(t, l, 60, 4, 3*time.Second)
			return onlyOn(res, idx...), describe(res)
		})
	}
	serves("4 of 4 primaries", 0, 1, 2, 3)

	l.Backends[0].SetHealthy(false)
	waitHealth(t, l, x, "web4", "UNHEALTHY", 0)
	if res := driveFor(t, l, 60, 4, 3*time.Second); !onlyOn(res, 1, 2, 3) {
		t.Errorf("3 of 4 primaries usable, ratio 0.75: %s; want be1-be3 only", describe(res))
	}

	l.Backends[1].SetHealthy(false)
	serves("2 of 4 primaries, below the ratio: the failover backend", 4)

	l.Backends[4].SetHealthy(false)
	serves("no usable failover backend: the usable primaries", 2, 3)

	l.Backends[2].SetHealthy(false)
	l.Backends[3].SetHealthy(false)
	testutil.WaitFor(t, 30*time.Second, "nothing usable, drop_traffic_if_unhealthy: new connections dropped", func() (bool, string) {
		res := driveFor(t, l, 8, 4, 2*time.Second)
		return res.Errors == 8, describe(res)
	})
	st := x.status(t)
	if r := ruleStatus(t, st, "web4"); r.Tier != "EMPTY" {
		t.Errorf("tier %s, want EMPTY", r.Tier)
	}
	if st.Counters.Drops["no-backend"] == 0 {
		t.Errorf("dropped SYNs not counted as no-backend: %v", st.Counters.Drops)
	}
}
