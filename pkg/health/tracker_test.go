package health

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/failover"
)

// Results by letter: P passes with weight 37, Q passes with weight 38,
// M passes without a weight header, F fails with a 500 carrying weight 5,
// T times out (no answer, no weight).
var results = map[byte]Result{
	'P': {OK: true, WeightKnown: true, Weight: 37, WeightState: failover.WeightOK},
	'Q': {OK: true, WeightKnown: true, Weight: 38, WeightState: failover.WeightOK},
	'M': {OK: true, WeightKnown: true, WeightState: failover.WeightMissing},
	'F': {WeightKnown: true, Weight: 5, WeightState: failover.WeightOK, Err: fmt.Errorf("HTTP probe: %w: 500", ErrStatus)},
	'T': {Err: fmt.Errorf("HTTP probe: %w", ErrTimeout)},
}

// state renders a status as H/U/? (health) plus the weight or weight state.
func state(s Status) string {
	h := map[failover.Health]string{failover.HealthUnknown: "?", failover.HealthHealthy: "H", failover.HealthUnhealthy: "U"}[s.Health]
	if s.WeightState == failover.WeightOK {
		return fmt.Sprintf("%s%d", h, s.Weight)
	}
	return h + map[failover.WeightState]string{failover.WeightMissing: "m", failover.WeightInvalid: "i", failover.WeightUnavailable: "u"}[s.WeightState]
}

func TestTracker(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rise, fall int
		in         string
		want       string // the state after each result; upper-case * marks a reported change
		changes    uint64 // health changes at the end
	}{
		{"rise after 2 passes", 2, 2, "PP", "?37* H37*", 1},
		{"weight is reported before the rise", 2, 2, "PPQ", "?37* H37* H38*", 1},
		{"missing header", 2, 2, "MM", "?m* Hm*", 1},
		{"fall after 2 timeouts, weight kept until then", 2, 2, "PPTT", "?37* H37* H37 Uu*", 2},
		{"one timeout is forgiven", 2, 2, "PPTPT", "?37* H37* H37 H37 H37", 1},
		{"500s carry their weight", 2, 2, "PPFF", "?37* H37* H5* U5*", 2},
		{"timeouts from the start", 2, 3, "TTT", "?u ?u Uu*", 1},
		{"unhealthy recovers after rise passes", 2, 1, "TPP", "Uu* U37* H37*", 2},
		{"flapping every probe never rises", 2, 2, "PFPFPFPFPF", "?37* ?5* ?37* ?5* ?37* ?5* ?37* ?5* ?37* ?5*", 0},
		{"flapping every probe without weights", 2, 2, "MTMTMTMT", "?m* ?m ?m ?m ?m ?m ?m ?m", 0},
		{"flapping every 2 probes, thresholds 3", 3, 3, "PPTTPPTTPPTT", "?37* ?37 ?37 ?37 ?37 ?37 ?37 ?37 ?37 ?37 ?37 ?37", 0},
		{"flapping every 2 probes, thresholds 2", 2, 2, "PPTTPPTT", "?37* H37* H37 Uu* U37* H37* H37 Uu*", 4},
		{"thresholds 1 follow every result", 1, 1, "PTP", "H37* Uu* H37*", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
			tr := newTracker(Key{Rule: "r"}, tc.rise, tc.fall, t0)
			var got []string
			since := t0
			for i := range len(tc.in) {
				now := t0.Add(time.Duration(i+1) * time.Second)
				before := tr.st.Health
				r := results[tc.in[i]]
				changed := tr.observe(r, now)
				s := state(tr.st)
				if changed {
					s += "*"
				}
				got = append(got, s)
				if tr.st.Health != before {
					since = now
				}
				if !tr.st.Since.Equal(since) || !tr.st.LastProbe.Equal(now) || !errors.Is(tr.st.LastError, r.Err) {
					t.Errorf("after %d: since %v last probe %v error %v, want %v %v %v", i, tr.st.Since, tr.st.LastProbe, tr.st.LastError, since, now, r.Err)
				}
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("%s:\n got %s\nwant %s", tc.in, g, tc.want)
			}
			if tr.st.Changes != tc.changes {
				t.Errorf("Changes = %d, want %d", tr.st.Changes, tc.changes)
			}
		})
	}
}
