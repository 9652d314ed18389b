package health

import (
	"time"

	"github.com/xlbnet/xlb/failover"
)

// tracker is the rise/fall state machine of one target (see doc.go). It is
// pure: results and times in, status out. The target's goroutine owns it;
// the target's mutex guards it against Checker.Status.
type tracker struct {
	rise, fall int // healthy_threshold, unhealthy_threshold
	successes  int // consecutive passes, 0 after a failure
	failures   int // consecutive failures, 0 after a pass
	st         Status
}

func newTracker(k Key, rise, fall int, now time.Time) tracker {
	return tracker{rise: rise, fall: fall, st: Status{
		Key:         k,
		Health:      failover.HealthUnknown,
		WeightState: failover.WeightUnavailable,
		Since:       now,
	}}
}

// observe applies one probe result and reports whether Health, Weight or
// WeightState changed.
func (t *tracker) observe(r Result, now time.Time) bool {
	before := t.st
	t.st.LastProbe = now
	t.st.LastLatency = r.Latency
	t.st.LastError = r.Err
	if r.OK {
		t.successes++
		t.failures = 0
	} else {
		t.failures++
		t.successes = 0
	}
	switch {
	case r.OK && t.st.Health != failover.HealthHealthy && t.successes >= t.rise:
		t.setHealth(failover.HealthHealthy, now)
	case !r.OK && t.st.Health != failover.HealthUnhealthy && t.failures >= t.fall:
		t.setHealth(failover.HealthUnhealthy, now)
	}
	switch {
	case r.WeightKnown:
		// An answer is the backend speaking: its weight counts at once,
		// even when the check failed (seeds 000.8: a backend with weight > 0
		// is preferred whatever its health).
		t.st.WeightState = r.WeightState
		t.st.Weight = 0
		if r.WeightState == failover.WeightOK {
			t.st.Weight = r.Weight
		}
	case t.failures >= t.fall:
		// No answer: the last weight stands until the fall threshold, so
		// one lost probe does not move traffic (the same hysteresis as
		// health).
		t.st.WeightState = failover.WeightUnavailable
		t.st.Weight = 0
	}
	return t.st.Health != before.Health || t.st.Weight != before.Weight || t.st.WeightState != before.WeightState
}

func (t *tracker) setHealth(h failover.Health, now time.Time) {
	t.st.Health = h
	t.st.Since = now
	t.st.Changes++
}
