package config

import (
	"strings"
	"testing"
)

// FuzzScanKeyLines: the line scanner never panics or loops, and every line
// it records exists in the text.
func FuzzScanKeyLines(f *testing.F) {
	f.Add(webRule)
	f.Add("a = [\n1,\n{b = \"\"\"\n\"\"\"}]\n[[x.y]]\n'q.k' = '''\n'''")
	f.Fuzz(func(t *testing.T, text string) {
		n := strings.Count(text, "\n") + 1
		for path, line := range scanKeyLines(text) {
			if line < 1 || line > n {
				t.Fatalf("%s at line %d of a %d-line text", path, line, n)
			}
		}
	})
}

// FuzzRule reads any rule text: it never panics, every issue has a line
// inside the file, and a rule without errors satisfies the invariants the
// data plane relies on.
func FuzzRule(f *testing.F) {
	f.Add(webRule)
	f.Add(lines(`protocol = "UDP"`, `ports = "ALL"`, `session_affinity = "CLIENT_IP"`) + strings.Replace(webRule, `ports = ["80"]`, ``, 1))
	f.Add(lines(`locality_lb_policy = "WEIGHTED_MAGLEV"`, `[failover]`, `ratio = 0.5`))
	f.Fuzz(func(t *testing.T, text string) {
		is := &issues{}
		sf := &srcFile{name: "r.toml", is: is}
		root := decodeFile(sf, []byte(text))
		if root == nil {
			if len(is.errs) == 0 {
				t.Fatal("a file that did not decode has no error")
			}
			return
		}
		rs := readRule(root, "r")
		n := strings.Count(text, "\n") + 1
		for _, e := range append(is.errs, is.warns...) {
			if e.Line < 0 || e.Line > n || e.Message == "" {
				t.Fatalf("bad issue %q in a %d-line file", e, n)
			}
		}
		if len(is.errs) > 0 {
			return
		}
		r := &rs.rule
		if !r.VIP.IsValid() || (!r.Ports.All && len(r.Ports.Ranges) == 0) || len(r.Backends()) == 0 {
			t.Fatalf("valid rule without VIP, ports or backends: %+v", r)
		}
		for i, pr := range r.Ports.Ranges {
			if pr.First == 0 || pr.First > pr.Last || (i > 0 && r.Ports.Ranges[i-1].Last >= pr.First) {
				t.Fatalf("bad port ranges %v", r.Ports.Ranges)
			}
		}
		if r.ConnectionTracking.PersistenceOnUnhealthy == PersistAlways && r.ConnectionTracking.TrackingMode == PerSession {
			t.Fatal("ALWAYS_PERSIST with PER_SESSION accepted")
		}
		if r.LocalityLBPolicy == WeightedMaglev && !r.HealthCheck.Type.HTTPFamily() {
			t.Fatal("WEIGHTED_MAGLEV without an HTTP check accepted")
		}
		if r.Failover.Ratio < 0 || r.Failover.Ratio > 1 {
			t.Fatalf("ratio %v accepted", r.Failover.Ratio)
		}
	})
}
