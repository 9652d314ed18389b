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

// readFuzzed decodes text as file name and reads it with read; it checks
// that a file that does not decode has an error and that every issue has
// a line inside the file, and reports whether read's result is clean.
func readFuzzed(t *testing.T, name, text string, read func(*table)) bool {
	t.Helper()
	is := &issues{}
	sf := &srcFile{name: name, is: is}
	root := decodeFile(sf, []byte(text))
	if root == nil {
		if len(is.errs) == 0 {
			t.Fatal("a file that did not decode has no error")
		}
		return false
	}
	read(root)
	n := strings.Count(text, "\n") + 1
	for _, e := range append(is.errs, is.warns...) {
		if e.Line < 0 || e.Line > n || e.Message == "" {
			t.Fatalf("bad issue %q in a %d-line file", e, n)
		}
	}
	return len(is.errs) == 0
}

// FuzzRule reads any rule text: it never panics, every issue has a line
// inside the file, and a rule without errors satisfies the invariants the
// data plane relies on.
func FuzzRule(f *testing.F) {
	f.Add(webRule)
	f.Add(lines(`protocol = "UDP"`, `ports = "ALL"`, `session_affinity = "CLIENT_IP"`) + strings.Replace(webRule, `ports = ["80"]`, ``, 1))
	f.Add(lines(`locality_lb_policy = "WEIGHTED_MAGLEV"`, `[failover]`, `ratio = 0.5`))
	f.Fuzz(func(t *testing.T, text string) {
		var rs *ruleSrc
		if !readFuzzed(t, "r.toml", text, func(root *table) { rs = readRule(root, "r") }) {
			return
		}
		r := &rs.rule
		if !r.VIP.IsValid() || (!r.Ports.All && len(r.Ports.Ranges) == 0) {
			t.Fatalf("valid rule without VIP or ports: %+v", r)
		}
		// A rule that names a backend service gets its backends when the
		// services are resolved; one that does not carries its own.
		if (r.Service == "") == (len(r.Backends()) == 0) {
			t.Fatalf("valid rule with backend_service %q and %d backends", r.Service, len(r.Backends()))
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

// FuzzService reads any backend service file: it never panics, every
// issue has a line inside the file, and a service without errors has
// backends and the invariants a rule has.
func FuzzService(f *testing.F) {
	f.Add(wwwService)
	f.Add(lines(`vip = "203.0.113.1"`, `source_ranges = ["198.51.100.0/24", "2001:db8::/32"]`) + wwwService)
	f.Fuzz(func(t *testing.T, text string) {
		var s *svcSrc
		if !readFuzzed(t, "s.toml", text, func(root *table) { s = readService(root, "s") }) {
			return
		}
		v := &s.svc
		if countBackends(v.Groups) == 0 || !validName(v.Name) {
			t.Fatalf("valid service without backends or name: %+v", v)
		}
		if v.ConnectionTracking.PersistenceOnUnhealthy == PersistAlways && v.ConnectionTracking.TrackingMode == PerSession {
			t.Fatal("ALWAYS_PERSIST with PER_SESSION accepted")
		}
		if v.LocalityLBPolicy == WeightedMaglev && !v.HealthCheck.Type.HTTPFamily() {
			t.Fatal("WEIGHTED_MAGLEV without an HTTP check accepted")
		}
	})
}
