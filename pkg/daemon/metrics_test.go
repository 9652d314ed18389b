package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xlbnet/xlb/failover"
)

// TestMetricsLint gathers a scrape of a daemon with a published rule and
// runs client_golang's linter (the checks of promtool check metrics) over
// every family; it also checks that the families are the declared ones
// and that drops and passes are apart.
func TestMetricsLint(t *testing.T) {
	d := &daemon{started: time.Now().Add(-time.Minute)}
	st := &failover.State{Tier: failover.TierPrimary, Backends: []failover.BackendState{
		{Name: "192.0.2.10", ID: 0, Health: failover.HealthHealthy, WeightState: failover.WeightMissing, Eligible: true},
		{Name: "192.0.2.11", ID: 1, Health: failover.HealthUnhealthy, WeightState: failover.WeightMissing},
	}}
	d.status = publishedStatus{XDPMode: "native", Queues: []int{0, 1}, Rules: []*ruleStatus{{Name: "web", VIP: addr("203.0.113.10"), Tier: "PRIMARY", State: st}}}
	reg, err := d.metricsRegistry()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, want := range []string{"xlb_build_info", "xlb_start_time_seconds", "xlb_rule_tier", "xlb_rule_packets_total", "xlb_backend_healthy",
		"xlb_backend_bytes_total", "xlb_backend_connections_total", "go_goroutines", "process_cpu_seconds_total"} {
		if !got[want] {
			t.Errorf("scrape lacks %s", want)
		}
	}
	declared := map[string]bool{}
	for _, f := range metricFamilies {
		if declared[f.Name] {
			t.Errorf("%s declared twice", f.Name)
		}
		declared[f.Name] = true
		if !strings.HasPrefix(f.Name, "xlb_") {
			t.Errorf("%s: not in the xlb_ namespace", f.Name)
		}
	}
	if !declared["xlb_drop_packets_total"] || !declared["xlb_pass_packets_total"] {
		t.Error("drops and passes are not two families")
	}
}
