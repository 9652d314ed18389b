package daemon

import (
	"reflect"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/config"
)

// TestCheckOf: every key of [health_check] reaches the prober. Each field
// of config.HealthCheck gets a value of its own; the health.Check field of
// the same name must carry it (Type becomes Kind through healthKinds), so
// a key added to config but not passed on fails here.
func TestCheckOf(t *testing.T) {
	hc := config.HealthCheck{Type: config.HealthHTTPS, ProxyHeader: config.ProxyV1, Path: config.ProbeDataPath}
	v := reflect.ValueOf(&hc).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name + "-value")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			if f.Type() == reflect.TypeOf(time.Duration(0)) {
				f.SetInt(int64(time.Duration(i+1) * time.Second))
			} else {
				f.SetInt(int64(i + 1))
			}
		case reflect.Uint16:
			f.SetUint(uint64(1000 + i))
		case reflect.Uint8: // enums: set above or left at their first value
		default:
			t.Fatalf("field %s: kind %s not handled by this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	got := reflect.ValueOf(checkOf(hc))
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if name == "Type" {
			if k := got.FieldByName("Kind").Interface(); k != healthKinds.of(hc.Type) {
				t.Errorf("Kind = %v, want %v", k, healthKinds.of(hc.Type))
			}
			continue
		}
		if name == "Path" {
			// Direct probes skip the daemon's dialer (probepath.go).
			if d := got.FieldByName("Direct").Bool(); d != (hc.Path == config.ProbeDirect) {
				t.Errorf("Direct = %v for path %s", d, hc.Path)
			}
			continue
		}
		if name == "ProxyHeader" {
			if p := got.FieldByName(name).Interface(); p != proxyHeaders.of(hc.ProxyHeader) {
				t.Errorf("ProxyHeader = %v, want %v", p, proxyHeaders.of(hc.ProxyHeader))
			}
			continue
		}
		g := got.FieldByName(name)
		if !g.IsValid() {
			t.Errorf("health.Check has no field %s", name)
			continue
		}
		if v.Field(i).Kind() == reflect.Uint8 {
			continue // an enum of its own: converted by its table, checked by TestEnumTables
		}
		if g.Interface() != v.Field(i).Interface() {
			t.Errorf("%s = %v, want %v", name, g.Interface(), v.Field(i).Interface())
		}
	}
}

// paceRun drives a healthPacer as the control loop does (daemon.go, the
// healthPoke and healthDue cases) through verdicts arriving at the given
// times, each publication taking cost; it returns how many publications
// there were, the largest number of verdicts in one, the longest a verdict
// waited to be published, and the share of the time spent publishing.
func paceRun(arrivals []time.Duration, cost time.Duration) (publications, largest int, longest time.Duration, busy float64) {
	var p healthPacer
	epoch := time.Unix(1000, 0)
	now := time.Duration(0) // the control goroutine is free from now on
	due := time.Duration(-1)
	var held []time.Duration
	publish := func() {
		publications++
		largest = max(largest, len(held))
		for _, a := range held {
			longest = max(longest, now-a)
		}
		held = held[:0]
		p.published(epoch.Add(now), epoch.Add(now+cost))
		now += cost
	}
	for i := 0; i < len(arrivals) || due >= 0; {
		if i < len(arrivals) && (due < 0 || arrivals[i] < due) {
			now = max(now, arrivals[i])
			// Every verdict parked by now is applied at this poke.
			for ; i < len(arrivals) && arrivals[i] <= now; i++ {
				held = append(held, arrivals[i])
			}
			if wait := p.hold(epoch.Add(now)); wait > 0 {
				if due < 0 {
					due = now + wait
				}
				continue
			}
			publish()
			continue
		}
		now, due = max(now, due), -1
		for ; i < len(arrivals) && arrivals[i] <= now; i++ {
			held = append(held, arrivals[i])
		}
		publish()
	}
	return publications, largest, longest, float64(publications) * float64(cost) / float64(now)
}

// TestHealthBatches: verdicts are published in batches. 10 000 backends
// whose verdicts change at 2000 a second (all within one 5 s interval,
// then on for a minute) cause at most one publication per 250 ms, each
// with hundreds of verdicts, none held longer than the gap; when a
// publication is slow (it grows with the rules), the gap grows with it so
// that health publications take at most a fifth of the control goroutine;
// a lone verdict is published at once.
func TestHealthBatches(t *testing.T) {
	stream := func(d time.Duration) []time.Duration {
		var at []time.Duration
		for i := range int(d / (500 * time.Microsecond)) {
			at = append(at, time.Duration(i)*500*time.Microsecond)
		}
		return at
	}
	for _, tc := range []struct {
		verdicts   []time.Duration
		cost       time.Duration
		maxPubs    int
		minLargest int
		maxWait    time.Duration
		maxBusy    float64
	}{
		{stream(5 * time.Second), 0, 21, 400, minHealthPublish, 0},
		{stream(5 * time.Second), 10 * time.Millisecond, 21, 400, minHealthPublish, 0.05},
		{stream(time.Minute), time.Second, 13, 8000, 6 * time.Second, 0.22}, // a fifth, and the first publication at once
	} {
		pubs, largest, longest, busy := paceRun(tc.verdicts, tc.cost)
		t.Logf("%d verdicts, publication %s: %d publications, up to %d verdicts in one, held up to %s, %.0f %% of the time publishing",
			len(tc.verdicts), tc.cost, pubs, largest, longest, 100*busy)
		if pubs > tc.maxPubs || largest < tc.minLargest || longest > tc.maxWait || busy > tc.maxBusy {
			t.Errorf("publication %s: %d publications (≤ %d), largest %d (≥ %d), held up to %s (≤ %s), busy %.2f (≤ %.2f)",
				tc.cost, pubs, tc.maxPubs, largest, tc.minLargest, longest, tc.maxWait, busy, tc.maxBusy)
		}
	}
	// A verdict after a quiet spell is not held.
	if pubs, _, longest, _ := paceRun([]time.Duration{time.Minute}, time.Millisecond); pubs != 1 || longest != 0 {
		t.Errorf("a lone verdict: %d publications, held %s; want 1, at once", pubs, longest)
	}
	// Two verdicts 100 ms apart: the second waits for the gap.
	if pubs, largest, longest, _ := paceRun([]time.Duration{time.Minute, time.Minute + 100*time.Millisecond}, 0); pubs != 2 || largest != 1 || longest != minHealthPublish-100*time.Millisecond {
		t.Errorf("two verdicts 100 ms apart: %d publications, held up to %s", pubs, longest)
	}
}
