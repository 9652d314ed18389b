package daemon

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/engine"
)

func TestUnmatchedVIPs(t *testing.T) {
	a, b := netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("2001:db8::10")
	vips := []engine.VIP{{Addr: a, Proto: 6, Port: 80}, {Addr: a, Proto: 6, Port: 443}, {Addr: b, Proto: 17, Port: 53}, {Addr: a}}
	if got, want := unmatchedVIPs(config.UnmatchedDrop, vips), []engine.VIP{{Addr: a}, {Addr: b}}; !reflect.DeepEqual(got, want) {
		t.Errorf("drop: %v, want %v", got, want)
	}
	if got := unmatchedVIPs(config.UnmatchedPass, vips); got != nil {
		t.Errorf("pass: %v, want nothing", got)
	}
}

// The lookup answer for a port no rule claims follows unmatched_vip_traffic,
// and for a refused source names the source ranges.
func TestLookupUnmatchedAndSourceRanges(t *testing.T) {
	tbl, err := hash.Build([]hash.Backend{{Name: "192.0.2.1", ID: 0, Weight: 1}}, 65537, 1)
	if err != nil {
		t.Fatal(err)
	}
	src, err := dataplane.NewSourceSet([]netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	rule := dataplane.Rule{Name: "web", Present: true, Table: tbl, Sources: src,
		Match:    dataplane.RuleMatch{VIP: addr("203.0.113.10").As16(), Protocol: dataplane.RuleTCP, Ports: []dataplane.PortRange{{Lo: 80, Hi: 80}}},
		Backends: []dataplane.Backend{{Name: "192.0.2.1", Present: true}}}
	snap, err := dataplane.NewSnapshot(1, []*dataplane.Rule{&rule})
	if err != nil {
		t.Fatal(err)
	}
	rs := &ruleStatus{Name: "web", Slot: 0}
	miss := func(*hash.Key, uint16, bool) (conntrack.Value, bool) { return conntrack.Value{}, false }
	look := func(src, dst string, port uint16, mode config.UnmatchedVIPTraffic) *control.LookupResult {
		m, err := lookupMeta(nil, control.LookupQuery{Src: src, Dst: dst, DstPort: int(port)})
		if err != nil {
			t.Fatal(err)
		}
		x := snap.Explain(m, 0, miss)
		var r *ruleStatus
		if x.Matched {
			r = rs
		}
		res := explainLookup(snap, r, "", m, &x)
		unmatchedLookup(res, mode, snap, m, &x)
		return res
	}
	if res := look("198.51.100.7:4000", "203.0.113.10", 81, config.UnmatchedDrop); res.Verdict != "DROP" || !strings.Contains(res.Why, "no-rule") {
		t.Errorf("unmatched port, drop: %+v", res)
	}
	if res := look("198.51.100.7:4000", "203.0.113.10", 81, config.UnmatchedPass); res.Verdict != "PASS" {
		t.Errorf("unmatched port, pass: %+v", res)
	}
	if res := look("198.51.100.7:4000", "203.0.113.99", 80, config.UnmatchedDrop); res.Verdict != "PASS" {
		t.Errorf("not a VIP: %+v", res)
	}
	if res := look("203.0.113.7:4000", "203.0.113.10", 80, config.UnmatchedDrop); res.Verdict != "DROP" || res.Rule != "web" ||
		!strings.Contains(res.Why, "source 203.0.113.7 is outside the rule's source_ranges (1 prefixes)") || !strings.Contains(res.Why, "source-range") {
		t.Errorf("refused source: %+v", res)
	}
	if res := look("198.51.100.7:4000", "203.0.113.10", 80, config.UnmatchedDrop); res.Backend != "192.0.2.1" || strings.Contains(res.Why, "source_ranges") {
		t.Errorf("admitted source: %+v", res)
	}
}
