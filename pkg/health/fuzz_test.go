package health

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/failover"
)

// FuzzParseWeight checks parseWeight against strconv on one header value.
func FuzzParseWeight(f *testing.F) {
	for _, s := range []string{"37", "0", "1000", "1001", "-1", "1.5", "abc", " 7\t", "", "0000000000000000000000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, st := parseWeight([]string{s})
		trimmed := strings.Trim(s, " \t")
		digits := trimmed != "" && strings.Trim(trimmed, "0123456789") == ""
		n, err := strconv.ParseUint(trimmed, 10, 64)
		if digits && err == nil && n <= failover.MaxWeight {
			if st != failover.WeightOK || uint64(w) != n {
				t.Fatalf("parseWeight(%q) = %d %s, want %d OK", s, w, st, n)
			}
			return
		}
		if st != failover.WeightInvalid || w != 0 {
			t.Fatalf("parseWeight(%q) = %d %s, want INVALID_WEIGHT", s, w, st)
		}
	})
}

// FuzzTracker feeds arbitrary result sequences to the rise/fall tracker and
// checks its promises: health moves only at the end of a long enough
// streak, the weight is 0 unless OK, a change is reported exactly when
// health, weight or weight state moved, and Changes counts health moves.
func FuzzTracker(f *testing.F) {
	f.Add(uint8(2), uint8(2), []byte("PPTTPFPF"))
	f.Add(uint8(1), uint8(3), []byte("TTTMMQ"))
	f.Add(uint8(10), uint8(10), []byte("PPPPPPPPPPFFFFFFFFFF"))
	f.Fuzz(func(t *testing.T, rise, fall uint8, seq []byte) {
		r, fl := int(rise%10)+1, int(fall%10)+1
		letters := "PQMFT"
		t0 := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
		tr := newTracker(Key{Rule: "r"}, r, fl, t0)
		var passes []bool
		var healthMoves uint64
		for i, b := range seq {
			res := results[letters[int(b)%len(letters)]]
			before := tr.st
			changed := tr.observe(res, t0.Add(time.Duration(i+1)*time.Second))
			passes = append(passes, res.OK)
			st := tr.st
			moved := st.Health != before.Health || st.Weight != before.Weight || st.WeightState != before.WeightState
			if changed != moved {
				t.Fatalf("step %d: changed = %v, but %v → %v", i, changed, state(before), state(st))
			}
			if st.WeightState != failover.WeightOK && st.Weight != 0 {
				t.Fatalf("step %d: weight %d with state %s", i, st.Weight, st.WeightState)
			}
			if st.Health != before.Health {
				healthMoves++
				need, pass := fl, false
				if st.Health == failover.HealthHealthy {
					need, pass = r, true
				}
				if len(passes) < need {
					t.Fatalf("step %d: %s after %d results, threshold %d", i, st.Health, len(passes), need)
				}
				for _, p := range passes[len(passes)-need:] {
					if p != pass {
						t.Fatalf("step %d: %s without %d results in a row", i, st.Health, need)
					}
				}
				if st.Health == failover.HealthUnknown {
					t.Fatalf("step %d: back to UNKNOWN", i)
				}
			}
		}
		if tr.st.Changes != healthMoves {
			t.Fatalf("Changes = %d, health moved %d times", tr.st.Changes, healthMoves)
		}
	})
}
