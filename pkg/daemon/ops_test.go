package daemon

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
)

// writeConfig writes an appliance configuration with one rule file per
// entry of rules (name → TOML body) and loads it.
func writeConfig(t *testing.T, rules map[string]string) (*config.Config, *config.State) {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "rules.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "xlb.toml"), []byte(fmt.Sprintf("interface = \"eth0\"\nhash_seed = \"0x5eed1ab\"\nstate_file = %q\ncontrol_socket = %q\n",
		filepath.Join(dir, "state.toml"), filepath.Join(dir, "xlb.sock"))), 0o644)
	for name, body := range rules {
		os.WriteFile(filepath.Join(dir, "rules.d", name+".toml"), []byte(fmt.Sprintf("name = %q\n%s", name, body)), 0o644)
	}
	cfg, _, err := config.Load(filepath.Join(dir, "xlb.toml"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := config.LoadState(cfg.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, st
}

func backendList(prefix string, from, n int) string {
	var q []string
	for i := from; i < from+n; i++ {
		q = append(q, fmt.Sprintf("%q", fmt.Sprintf("%s%d", prefix, i)))
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func webRule(extra string, groups string) string { return vipRule("203.0.113.10", extra, groups) }

func vipRule(vip, extra, groups string) string {
	return `vip = "` + vip + `"
ports = ["80"]
` + extra + `
[health_check]
type = "TCP"
port = 80
` + groups
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestSimulateRemoveOneOfTen is the acceptance of issue 5: removing one
// of ten backends moves about 10 % of the flows (the removed backend's)
// and under 1 % of the rest.
func TestSimulateRemoveOneOfTen(t *testing.T) {
	cfg, st := writeConfig(t, map[string]string{
		"web": webRule("", "[[group]]\nname = \"a\"\nbackends = "+backendList("192.0.2.", 1, 10)+"\n"),
		"api": vipRule("203.0.113.11", "", "[[group]]\nname = \"a\"\nbackends = [\"192.0.2.1\"]\n"),
	})
	res, err := Simulate(cfg, st, SimOptions{Rule: "web", Changes: []SimChange{{Kind: SimRemove, Addr: addr("192.0.2.4")}}, Flows: 200000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Rule != "web" || len(res[0].Backends) != 10 {
		t.Fatalf("result %+v", res)
	}
	r := res[0]
	for _, b := range r.Backends {
		sampled := float64(b.FlowsMoved) / float64(r.Flows)
		if b.Address == "192.0.2.4" {
			if b.MovedAway < 0.09 || b.MovedAway > 0.11 || b.MovedOwn != 1 || b.InAfter || b.After != 0 {
				t.Errorf("removed backend: %+v; want ~10%% of all flows moved, all of its own", b)
			}
			if math.Abs(sampled-b.MovedAway) > 0.005 {
				t.Errorf("removed backend: sampled %.4f moved, table says %.4f", sampled, b.MovedAway)
			}
			continue
		}
		if b.MovedAway >= 0.01 || sampled >= 0.01 {
			t.Errorf("survivor %s: %.2f%% of flows moved away (sampled %.2f%%), want < 1%%", b.Address, 100*b.MovedAway, 100*sampled)
		}
		if b.After < 0.105 || b.After > 0.117 {
			t.Errorf("survivor %s holds %.2f%% after, want ~11.1%%", b.Address, 100*b.After)
		}
	}
	if r.SurvivorMoved >= 0.01 || r.Moved < 0.09 || r.Moved > 0.12 {
		t.Errorf("moved %.2f%%, survivors %.2f%%", 100*r.Moved, 100*r.SurvivorMoved)
	}
	t.Logf("moved %.2f%% of flows (sampled %d of %d), survivors %.3f%%", 100*r.Moved, r.FlowsMoved, r.Flows, 100*r.SurvivorMoved)
	if r.TierBefore != "PRIMARY" || r.TierAfter != "PRIMARY" {
		t.Errorf("tiers %s → %s", r.TierBefore, r.TierAfter)
	}
}

func TestSimulateChanges(t *testing.T) {
	groups := "[[group]]\nname = \"a\"\nbackends = " + backendList("192.0.2.", 1, 4) + "\n[[group]]\nname = \"b\"\nrole = \"failover\"\nbackends = [\"192.0.2.9\"]\n"
	cfg, st := writeConfig(t, map[string]string{
		"web":  webRule("", groups),
		"wweb": strings.Replace(vipRule("203.0.113.12", "locality_lb_policy = \"WEIGHTED_MAGLEV\"", "[[group]]\nname = \"a\"\nbackends = "+backendList("192.0.2.", 1, 4)+"\n"), "TCP", "HTTP", 1),
	})
	find := func(r SimRule, a string) SimBackend {
		for _, b := range r.Backends {
			if b.Address == a {
				return b
			}
		}
		t.Fatalf("%s not in %+v", a, r.Backends)
		return SimBackend{}
	}

	// Add a fifth primary: ~20 % of flows move, all to the new one.
	res, err := Simulate(cfg, st, SimOptions{Rule: "web", Changes: []SimChange{{Kind: SimAdd, Addr: addr("192.0.2.5")}}})
	if err != nil {
		t.Fatal(err)
	}
	if nb := find(res[0], "192.0.2.5"); nb.InBefore || !nb.InAfter || nb.Gained < 0.18 || nb.Gained > 0.22 || res[0].Moved-nb.Gained > 0.01 {
		t.Errorf("add: %+v, moved %.3f", nb, res[0].Moved)
	}

	// Mark 3 of 4 primaries failover: the one primary left still serves
	// (ratio 0), the failover group never did.
	var cs []SimChange
	for _, a := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		cs = append(cs, SimChange{Kind: SimRole, Addr: addr(a), Role: config.RoleFailover})
	}
	res, err = Simulate(cfg, st, SimOptions{Rule: "web", Changes: cs})
	if err != nil {
		t.Fatal(err)
	}
	if b := find(res[0], "192.0.2.4"); b.After != 1 {
		t.Errorf("role: the remaining primary holds %.3f after", b.After)
	}
	if b := find(res[0], "192.0.2.9"); b.Before != 0 || b.After != 0 {
		t.Errorf("role: failover backend %+v", b)
	}

	// Weight 3 on one of four (the others weigh 1): it gets 50 %.
	res, err = Simulate(cfg, st, SimOptions{Rule: "wweb", Changes: []SimChange{{Kind: SimWeight, Addr: addr("192.0.2.1"), Weight: 3}}, Flows: 20000, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if b := find(res[0], "192.0.2.1"); math.Abs(b.After-0.5) > 0.01 || math.Abs(b.Before-0.25) > 0.01 {
		t.Errorf("weight: %+v", b)
	}

	// Mistakes are errors, not empty results.
	for _, tc := range []struct {
		opts SimOptions
		want string
	}{
		{SimOptions{Rule: "web", Changes: []SimChange{{Kind: SimWeight, Addr: addr("192.0.2.1"), Weight: 2}}}, "weights need WEIGHTED_MAGLEV"},
		{SimOptions{Rule: "web", Changes: []SimChange{{Kind: SimRemove, Addr: addr("192.0.2.77")}}}, "no such backend"},
		{SimOptions{Rule: "web", Changes: []SimChange{{Kind: SimAdd, Addr: addr("192.0.2.1")}}}, "already a backend"},
		{SimOptions{Rule: "nope", Changes: []SimChange{{Kind: SimRemove, Addr: addr("192.0.2.1")}}}, `no rule "nope"`},
		{SimOptions{Changes: []SimChange{{Kind: SimRemove, Addr: addr("192.0.2.77")}}}, "no rule has the backends"},
		{SimOptions{Rule: "web"}, "no change"},
	} {
		if _, err := Simulate(cfg, st, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.opts, err, tc.want)
		}
	}

	// Without --rule, a removal concerns every rule that has the backend.
	res, err = Simulate(cfg, st, SimOptions{Changes: []SimChange{{Kind: SimRemove, Addr: addr("192.0.2.2")}}})
	if err != nil || len(res) != 2 {
		t.Fatalf("both rules: %+v, %v", res, err)
	}
}

func TestLookupMeta(t *testing.T) {
	cfg, _ := writeConfig(t, map[string]string{"web": webRule("", "[[group]]\nname = \"a\"\nbackends = [\"192.0.2.1\"]\n")})
	r := &cfg.Rules[0]
	m, err := lookupMeta(r, control.LookupQuery{Rule: "web", Src: "198.51.100.7:40000"})
	if err != nil {
		t.Fatal(err)
	}
	want := packet.Meta{Family: packet.IPv4}
	want.Src, want.Dst = addr("198.51.100.7").As16(), addr("203.0.113.10").As16()
	want.SrcPort, want.DstPort, want.Proto, want.TCPFlags = 40000, 80, packet.ProtoTCP, packet.TCPFlagACK
	if *m != want {
		t.Errorf("meta %+v, want %+v", *m, want)
	}
	m, _ = lookupMeta(r, control.LookupQuery{Rule: "web", Src: "198.51.100.7:1", DstPort: 8080, SYN: true, Proto: "udp"})
	if m.DstPort != 8080 || m.Proto != packet.ProtoUDP || m.TCPFlags != 0 {
		t.Errorf("udp: %+v", m)
	}
	m, _ = lookupMeta(r, control.LookupQuery{Rule: "web", Src: "198.51.100.7:1", SYN: true})
	if m.TCPFlags != packet.TCPFlagSYN {
		t.Errorf("syn: flags %#x", m.TCPFlags)
	}
	m, err = lookupMeta(r, control.LookupQuery{Rule: "web", Src: "198.51.100.7", Proto: "ESP"})
	if err != nil || m.Proto != packet.ProtoESP || m.SrcPort != 0 || m.DstPort != 0 {
		t.Errorf("esp: %+v, %v", m, err)
	}
	for _, q := range []control.LookupQuery{
		{Src: "198.51.100.7"},                   // TCP needs a port
		{Src: "not-an-address:1"},               // garbage
		{Src: "[2001:db8::1]:5"},                // v6 client, v4 VIP
		{Src: "198.51.100.7:1", Proto: "SCTPX"}, // unknown protocol
		{Src: "198.51.100.7:1", Proto: "ICMP"},  // not a flow
		{Src: "198.51.100.7:1", Dst: "vip"},     // bad dst
	} {
		if _, err := lookupMeta(r, q); err == nil {
			t.Errorf("%+v accepted", q)
		}
	}
}

// TestExplainWords checks the lookup answer's words against the data
// plane's explanation for each path.
func TestExplainWords(t *testing.T) {
	bs := []hash.Backend{{Name: "192.0.2.1", ID: 0, Weight: 1}, {Name: "192.0.2.2", ID: 1, Weight: 1}}
	tbl, err := hash.Build(bs, 65537, 1)
	if err != nil {
		t.Fatal(err)
	}
	rule := dataplane.Rule{Name: "web", Present: true, Table: tbl,
		Match:    dataplane.RuleMatch{VIP: addr("203.0.113.10").As16(), Protocol: dataplane.RuleTCP, Ports: []dataplane.PortRange{{Lo: 80, Hi: 80}}},
		Backends: []dataplane.Backend{{Name: "192.0.2.1", Present: true}, {Name: "192.0.2.2", Present: true}}}
	// Backend 0 has a next hop; backend 1 has none (the worker drops its packets).
	tmpl, err := encap.NewTemplate(encap.Spec{Kind: encap.IPIP, SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2}, Src: addr("192.0.2.254"), Dst: addr("192.0.2.1"), Inner: packet.IPv4, MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	rule.Backends[0].Template = tmpl
	snap, err := dataplane.NewSnapshot(1, []dataplane.Rule{rule})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := writeConfig(t, map[string]string{"web": webRule("", "[[group]]\nname = \"a\"\nbackends = [\"192.0.2.1\", \"192.0.2.2\"]\n")})
	rs := &RuleStatus{Name: "web", Slot: 0, Tier: failover.TierPrimary.String(), Eligible: 2, Rule: &cfg.Rules[0]}
	m, _ := lookupMeta(rs.Rule, control.LookupQuery{Src: "198.51.100.7:40000"})

	miss := func(*hash.Key, uint16, bool) (conntrack.Value, bool) { return conntrack.Value{}, false }
	// Pick a client whose new flow goes to backend 0.
	for port := uint16(40000); ; port++ {
		m.SrcPort = port
		if x := snap.Explain(m, 0, miss); x.MaglevBackend == 0 {
			break
		}
	}
	x := snap.Explain(m, 0, miss)
	res := Explain(snap, rs, m, &x)
	if res.Verdict != "TX" || res.Backend != "192.0.2.1" || res.Backend != res.MaglevBackend || !strings.Contains(res.Why, "no tracked entry: new flow, Maglev slot") ||
		res.TrackingKey != fmt.Sprintf("TCP 198.51.100.7:%d → 203.0.113.10:80", m.SrcPort) || res.SelectionKey != res.TrackingKey || !res.Trackable {
		t.Errorf("new flow: %+v", res)
	}
	// An entry to the other backend decides; the answer says so and what a new flow would get.
	other := uint32(1)
	hit := func(*hash.Key, uint16, bool) (conntrack.Value, bool) { return conntrack.Value{Backend: other}, true }
	x = snap.Explain(m, 0, hit)
	res = Explain(snap, rs, m, &x)
	if res.Backend != rule.Backends[other].Name || !res.EntryFound || !strings.Contains(res.Why, "tracked entry valid") || !strings.Contains(res.Why, "a new flow would get") {
		t.Errorf("tracked: %+v", res)
	}
	// No template: the worker would drop it.
	if res.Verdict != "DROP" || !strings.Contains(res.Why, "no-next-hop") {
		t.Errorf("without a next hop: %+v", res)
	}
	// A SYN re-selects whatever the entry says.
	syn := *m
	syn.TCPFlags = packet.TCPFlagSYN
	x = snap.Explain(&syn, 0, hit)
	res = Explain(snap, rs, &syn, &x)
	if res.Verdict != "TX" || res.Backend != "192.0.2.1" || !strings.Contains(res.Why, "new connection (a SYN re-selects)") || !strings.Contains(res.Why, "replaced") {
		t.Errorf("syn: %+v", res)
	}
	// A port the rule does not serve.
	m.DstPort = 81
	x = snap.Explain(m, 0, miss)
	if res = Explain(snap, rs, m, &x); res.Verdict != "DROP" || !strings.Contains(res.Why, "matches no forwarding rule") {
		t.Errorf("unmatched: %+v", res)
	}
}

func TestFormatKeyAndProto(t *testing.T) {
	k := hash.Key{Src: addr("2001:db8::7").As16(), Dst: addr("2001:db8::10").As16(), Proto: packet.ProtoUDP, SrcPort: 5, DstPort: 53, Kind: hash.Tuple5}
	for _, tc := range []struct {
		kind hash.TupleKind
		want string
	}{
		{hash.Tuple5, "UDP [2001:db8::7]:5 → [2001:db8::10]:53"},
		{hash.Tuple3, "UDP 2001:db8::7 → 2001:db8::10"},
		{hash.Tuple2, "2001:db8::7 → 2001:db8::10"},
		{hash.TupleNone, "(none)"},
	} {
		k.Kind = tc.kind
		if got := FormatKey(&k); got != tc.want {
			t.Errorf("%d: %q, want %q", tc.kind, got, tc.want)
		}
	}
	for s, want := range map[string]uint8{"tcp": 6, "UDP": 17, "esp": 50, "47": 47} {
		if got, err := ParseProto(s); err != nil || got != want {
			t.Errorf("%s: %d %v", s, got, err)
		}
	}
	if _, err := ParseProto("300"); err == nil {
		t.Error("300 accepted")
	}
}
