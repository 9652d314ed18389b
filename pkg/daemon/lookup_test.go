package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
)

func TestLookupMeta(t *testing.T) {
	cfg, _ := writeConfig(t, map[string]string{"web": webRule("", "[[group]]\nname = \"a\"\nbackends = [\"192.0.2.1\"]\n")})
	r := cfg.Rules[0]
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
	// Without a rule: dst is needed, TCP is the default, ports have no default.
	m, err = lookupMeta(nil, control.LookupQuery{Src: "198.51.100.7:40000", Dst: "203.0.113.10", DstPort: 443})
	if err != nil || m.Proto != packet.ProtoTCP || m.DstPort != 443 || m.Dst != addr("203.0.113.10").As16() {
		t.Errorf("no rule: %+v %v", m, err)
	}
	for _, q := range []control.LookupQuery{
		{Src: "198.51.100.7:1", DstPort: 80},         // no dst
		{Src: "198.51.100.7:1", Dst: "203.0.113.10"}, // no port
	} {
		if _, err := lookupMeta(nil, q); err == nil {
			t.Errorf("no rule: %+v accepted", q)
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
	snap, err := dataplane.NewSnapshot(1, []*dataplane.Rule{&rule})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := writeConfig(t, map[string]string{"web": webRule("", "[[group]]\nname = \"a\"\nbackends = [\"192.0.2.1\", \"192.0.2.2\"]\n")})
	rs := &ruleStatus{Name: "web", Slot: 0, Tier: failover.TierPrimary.String(), Eligible: 2, Rule: cfg.Rules[0]}
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
	res := explainLookup(snap, rs, "web", m, &x)
	if res.Verdict != "TX" || res.Backend != "192.0.2.1" || res.Backend != res.MaglevBackend || !strings.Contains(res.Why, "no tracked entry: new flow, Maglev slot") ||
		res.TrackingKey != fmt.Sprintf("TCP 198.51.100.7:%d → 203.0.113.10:80", m.SrcPort) || res.SelectionKey != res.TrackingKey || !res.Trackable {
		t.Errorf("new flow: %+v", res)
	}
	// An entry to the other backend decides; the answer says so and what a new flow would get.
	other := uint32(1)
	hit := func(*hash.Key, uint16, bool) (conntrack.Value, bool) { return conntrack.Value{Backend: other}, true }
	x = snap.Explain(m, 0, hit)
	res = explainLookup(snap, rs, "web", m, &x)
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
	res = explainLookup(snap, rs, "web", &syn, &x)
	if res.Verdict != "TX" || res.Backend != "192.0.2.1" || !strings.Contains(res.Why, "new connection (a SYN re-selects)") || !strings.Contains(res.Why, "replaced") {
		t.Errorf("syn: %+v", res)
	}
	// A port no rule serves: the XDP program passes it to the kernel
	// (lookup once said DROP; docs/design.md#rules-and-vips).
	m.DstPort = 81
	x = snap.Explain(m, 0, miss)
	if res = explainLookup(snap, nil, "web", m, &x); res.Verdict != "PASS" || !strings.Contains(res.Why, "does not match rule web, nor any other: the XDP program passes it") {
		t.Errorf("unmatched: %+v", res)
	}
	if res = explainLookup(snap, nil, "", m, &x); res.Verdict != "PASS" || res.Rule != "" || !strings.Contains(res.Why, "no forwarding rule matches") {
		t.Errorf("unmatched, no rule asked: %+v", res)
	}
	// Asked about another rule: the answer is the matching rule's, and says so.
	m.DstPort = 80
	x = snap.Explain(m, 0, miss)
	if res = explainLookup(snap, rs, "dns", m, &x); res.Rule != "web" || res.Verdict != "TX" || !strings.HasPrefix(res.Why, "the flow matches rule web, not dns: ") {
		t.Errorf("other rule: %+v", res)
	}
}
