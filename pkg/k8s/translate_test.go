package k8s

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/xlbnet/xlb/pkg/config"
)

// testController is a Controller for the pure parts (translate, render,
// allocate): no client, no informers.
func testController(t *testing.T, mod func(*Options)) *Controller {
	t.Helper()
	o := Options{Pools: testPools, Encap: "DIRECT", Identity: "test", ClientZones: map[string][]netip.Prefix{
		"zone-a": {netip.MustParsePrefix("198.51.100.0/25")}, "zone-b": {netip.MustParsePrefix("198.51.100.128/25")},
	}}
	if mod != nil {
		mod(&o)
	}
	if err := o.setDefaults(); err != nil {
		t.Fatal(err)
	}
	return &Controller{opts: o, log: o.Logger}
}

// TestTranslate: what each Service field and annotation becomes, read back
// through the configuration loader (the rendered files are valid rules).
func TestTranslate(t *testing.T) {
	nodes := []*corev1.Node{
		node("a1", "198.18.0.100", "fd00:18::100", zone("zone-a")),
		node("a2", "198.18.0.101", "fd00:18::101", zone("zone-a")),
		node("b1", "198.18.0.102", "", zone("zone-b")),
		node("cordoned", "198.18.0.103", "", zone("zone-b"), unschedulable),
		node("down", "198.18.0.104", "", zone("zone-b"), notReady),
		node("excluded", "198.18.0.105", "", zone("zone-b"), excluded),
	}
	slice4 := endpoints("default", "web", "web-4", discoveryv1.AddressTypeIPv4,
		"a1=198.18.64.10", "a1=198.18.64.11", "a1=198.18.64.12", "b1=198.18.66.10", "!a2=198.18.65.10", "~a2=198.18.65.11", "excluded=198.18.69.1")
	slice6 := endpoints("default", "web", "web-6", discoveryv1.AddressTypeIPv6, "a1=fd00:18:64::10", "a2=fd00:18:65::10")
	tests := []struct {
		name    string
		svc     *corev1.Service
		want    []string // summaries of the rules, by file name
		notices []string // reasons
		err     string
	}{
		{
			name: "Cluster: every Ready, schedulable node not excluded, kube-proxy's check",
			svc:  service("default", "web", status("203.0.113.65")),
			want: []string{"k8s.default.web.tcp.ipv4 203.0.113.65 TCP 80,443 NONE MAGLEV HTTP:10256/healthz DIRECT | zone-a: 198.18.0.100 198.18.0.101 | zone-b: 198.18.0.102"},
		},
		{
			name: "Local: nodes with a ready, serving, non-terminating endpoint, the health check node port",
			svc:  service("default", "web", local, status("203.0.113.65")),
			want: []string{"k8s.default.web.tcp.ipv4 203.0.113.65 TCP 80,443 NONE MAGLEV HTTP:31999/ DIRECT | zone-a: 198.18.0.100 | zone-b: 198.18.0.102"},
		},
		{
			name: "Local and pods-per-node: static weights from the endpoints",
			svc:  service("default", "web", local, annotate(AnnotationWeighted, WeightedPodsPerNode), status("203.0.113.65")),
			want: []string{"k8s.default.web.tcp.ipv4 203.0.113.65 TCP 80,443 NONE WEIGHTED_MAGLEV HTTP:31999/ DIRECT | zone-a: 198.18.0.100/3 | zone-b: 198.18.0.102/1"},
		},
		{
			name: "GKE's annotation means the same",
			svc:  service("default", "web", local, annotate(AnnotationGKEWeighted, WeightedPodsPerNode), status("203.0.113.65")),
			want: []string{"k8s.default.web.tcp.ipv4 203.0.113.65 TCP 80,443 NONE WEIGHTED_MAGLEV HTTP:31999/ DIRECT | zone-a: 198.18.0.100/3 | zone-b: 198.18.0.102/1"},
		},
		{
			name:    "Cluster ignores weights and says so",
			svc:     service("default", "web", annotate(AnnotationGKEWeighted, WeightedPodsPerNode), status("203.0.113.65")),
			want:    []string{"k8s.default.web.tcp.ipv4 203.0.113.65 TCP 80,443 NONE MAGLEV HTTP:10256/healthz DIRECT | zone-a: 198.18.0.100 198.18.0.101 | zone-b: 198.18.0.102"},
			notices: []string{"WeightsIgnored"},
		},
		{
			name: "ClientIP affinity and zonal affinity",
			svc:  service("default", "web", clientIP, annotate(AnnotationZonalAffinity, ZonalSpillCrossZone), status("203.0.113.65")),
			want: []string{"k8s.default.web.tcp.ipv4 203.0.113.65 TCP 80,443 CLIENT_IP MAGLEV HTTP:10256/healthz DIRECT ZONAL_AFFINITY_SPILL_CROSS_ZONE/0 | zone-a: 198.18.0.100 198.18.0.101 | zone-b: 198.18.0.102"},
		},
		{
			name: "TCP and UDP, dual-stack: a file per protocol and family",
			svc:  service("default", "web", udp(53), dualStack, local, status("203.0.113.65", "fd00:203:113::100")),
			want: []string{
				"k8s.default.web.tcp.ipv4 203.0.113.65 TCP 80,443 NONE MAGLEV HTTP:31999/ DIRECT | zone-a: 198.18.0.100 | zone-b: 198.18.0.102",
				"k8s.default.web.tcp.ipv6 fd00:203:113::100 TCP 80,443 NONE MAGLEV HTTP:31999/ DIRECT | zone-a: fd00:18::100 fd00:18::101",
				"k8s.default.web.udp.ipv4 203.0.113.65 UDP 53 NONE MAGLEV HTTP:31999/ DIRECT | zone-a: 198.18.0.100 | zone-b: 198.18.0.102",
				"k8s.default.web.udp.ipv6 fd00:203:113::100 UDP 53 NONE MAGLEV HTTP:31999/ DIRECT | zone-a: fd00:18::100 fd00:18::101",
			},
		},
		{
			name:    "SCTP is not served",
			svc:     service("default", "web", status("203.0.113.65"), func(s *corev1.Service) { s.Spec.Ports[1].Protocol = corev1.ProtocolSCTP }),
			want:    []string{"k8s.default.web.tcp.ipv4 203.0.113.65 TCP 80 NONE MAGLEV HTTP:10256/healthz DIRECT | zone-a: 198.18.0.100 198.18.0.101 | zone-b: 198.18.0.102"},
			notices: []string{"ProtocolNotServed"},
		},
		{
			name: "source ranges: each family's prefixes, host bits cleared",
			svc: service("default", "web", dualStack, status("203.0.113.65", "fd00:203:113::100"), func(s *corev1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.7/25", "fd00:51::/64", "192.0.2.0/24", "198.51.100.0/25"}
			}),
			want: []string{
				"k8s.default.web.tcp.ipv4 203.0.113.65 TCP 80,443 NONE MAGLEV HTTP:10256/healthz DIRECT src=192.0.2.0/24,198.51.100.0/25 | zone-a: 198.18.0.100 198.18.0.101 | zone-b: 198.18.0.102",
				"k8s.default.web.tcp.ipv6 fd00:203:113::100 TCP 80,443 NONE MAGLEV HTTP:10256/healthz DIRECT src=fd00:51::/64 | zone-a: fd00:18::100 fd00:18::101",
			},
		},
		{
			name: "source ranges of one family: no rule for the other",
			svc: service("default", "web", dualStack, status("203.0.113.65", "fd00:203:113::100"),
				annotate(AnnotationSourceRanges, "198.51.100.0/24, 192.0.2.0/24")),
			want:    []string{"k8s.default.web.tcp.ipv4 203.0.113.65 TCP 80,443 NONE MAGLEV HTTP:10256/healthz DIRECT src=192.0.2.0/24,198.51.100.0/24 | zone-a: 198.18.0.100 198.18.0.101 | zone-b: 198.18.0.102"},
			notices: []string{"SourceRangesExcludeFamily"},
		},
		{
			name: "a bad source range annotation is an error",
			svc:  service("default", "web", status("203.0.113.65"), annotate(AnnotationSourceRanges, "198.51.100.0/33")),
			err:  `annotation service.beta.kubernetes.io/load-balancer-source-ranges: "198.51.100.0/33" is not a prefix`,
		},
		{
			name: "no VIP in the status yet: no rule",
			svc:  service("default", "web"),
		},
		{
			name:    "Local without endpoints: no rule, a warning",
			svc:     service("default", "empty", local, status("203.0.113.66")),
			notices: []string{"NoBackends"},
		},
		{
			name: "a bad annotation is an error",
			svc:  service("default", "web", annotate(AnnotationWeighted, "pods"), status("203.0.113.65")),
			err:  `annotation xlbnet.github.io/weighted-load-balancing: "pods" is not "pods-per-node"`,
		},
		{
			name: "a bad zonal annotation is an error",
			svc:  service("default", "web", annotate(AnnotationZonalAffinity, "yes"), status("203.0.113.65")),
			err:  `annotation xlbnet.github.io/zonal-affinity: "yes" is not "spill-cross-zone"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testController(t, nil)
			var infos []nodeInfo
			for _, n := range nodes {
				infos = append(infos, newNodeInfo(n))
			}
			var eps []*discoveryv1.EndpointSlice
			if tc.svc.Name == "web" {
				eps = []*discoveryv1.EndpointSlice{slice4, slice6}
			}
			tr, err := c.translate(tc.svc, c.statusVIPs(tc.svc), infos, eps)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var reasons []string
			for _, n := range tr.notices {
				reasons = append(reasons, n.reason)
			}
			if !slices.Equal(reasons, tc.notices) {
				t.Errorf("notices %v, want %v", tr.notices, tc.notices)
			}
			overlay := map[string][]byte{}
			for _, f := range tr.files {
				if f.name != strings.Split(summaryName(f), " ")[0]+".toml" {
					t.Errorf("file %s holds rule %s", f.name, summaryName(f))
				}
				overlay[f.name] = f.content
				if cl, svc, ok := parseMarker(f.content); !ok || cl != DefaultClass || svc != "default/"+tc.svc.Name {
					t.Errorf("%s: marker %q %q %v", f.name, cl, svc, ok)
				}
			}
			cfg, _, err := config.LoadWithRules(testConfig(t, nil), overlay)
			if err != nil {
				t.Fatalf("rendered rules do not load: %v\n%s", err, joinContents(overlay))
			}
			var got []string
			for _, r := range cfg.Rules {
				got = append(got, summary(*r))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func summaryName(f ruleFile) string {
	for _, l := range strings.Split(string(f.content), "\n") {
		if v, ok := strings.CutPrefix(l, "name = "); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

func joinContents(m map[string][]byte) string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(m)) {
		b.WriteString("== " + n + "\n" + string(m[n]))
	}
	return b.String()
}

// TestRenderDeterministic: the same input renders the same bytes whatever
// the order nodes and slices come in (every appliance writes the same file).
func TestRenderDeterministic(t *testing.T) {
	c := testController(t, nil)
	svc := service("default", "web", local, annotate(AnnotationWeighted, WeightedPodsPerNode), annotate(AnnotationZonalAffinity, ZonalSpillCrossZone), status("203.0.113.65"))
	n1, n2 := newNodeInfo(node("a", "198.18.0.100", "", zone("z1"))), newNodeInfo(node("b", "198.18.0.101", "", zone("z2")))
	s1 := endpoints("default", "web", "s1", discoveryv1.AddressTypeIPv4, "a=198.18.64.1", "b=198.18.65.1")
	s2 := endpoints("default", "web", "s2", discoveryv1.AddressTypeIPv4, "a=198.18.64.2")
	// The controller sorts nodes and slices by name before translating.
	one, err := c.translate(svc, c.statusVIPs(svc), []nodeInfo{n1, n2}, []*discoveryv1.EndpointSlice{s1, s2})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := c.translate(svc, c.statusVIPs(svc), []nodeInfo{n1, n2}, []*discoveryv1.EndpointSlice{s1, s2})
		if err != nil {
			t.Fatal(err)
		}
		if string(again.files[0].content) != string(one.files[0].content) {
			t.Fatalf("two renderings differ:\n%s\n%s", one.files[0].content, again.files[0].content)
		}
	}
	if !strings.Contains(string(one.files[0].content), `{address = "198.18.0.100", weight = 2}, # a`) {
		t.Errorf("node comment or weight missing:\n%s", one.files[0].content)
	}
}

// TestStableSubset: above the limit a fixed subset; a node leaving changes
// at most one member; different Services get different subsets.
func TestStableSubset(t *testing.T) {
	var all []nodeInfo
	for i := range 300 {
		all = append(all, nodeInfo{name: "node-" + strconv.Itoa(i)})
	}
	names := func(l []nodeInfo) map[string]bool {
		m := map[string]bool{}
		for _, n := range l {
			m[n.name] = true
		}
		return m
	}
	a := stableSubset(all, "default/web", MaxClusterNodes)
	if len(a) != MaxClusterNodes {
		t.Fatalf("subset of %d, want %d", len(a), MaxClusterNodes)
	}
	if !slices.IsSortedFunc(a, func(x, y nodeInfo) int { return strings.Compare(x.name, y.name) }) {
		t.Error("subset not in name order")
	}
	// Remove a chosen node: one other node comes in, the rest stay.
	chosen := names(a)
	var without []nodeInfo
	removed := a[7].name
	for _, n := range all {
		if n.name != removed {
			without = append(without, n)
		}
	}
	b := names(stableSubset(without, "default/web", MaxClusterNodes))
	kept, added := 0, 0
	for n := range b {
		if chosen[n] {
			kept++
		} else {
			added++
		}
	}
	if kept != MaxClusterNodes-1 || added != 1 {
		t.Errorf("after removing a node: kept %d, added %d; want %d and 1", kept, added, MaxClusterNodes-1)
	}
	other := names(stableSubset(all, "default/api", MaxClusterNodes))
	same := 0
	for n := range other {
		if chosen[n] {
			same++
		}
	}
	if same == MaxClusterNodes {
		t.Error("two Services got the same subset")
	}
	if got := stableSubset(all[:10], "default/web", MaxClusterNodes); len(got) != 10 {
		t.Errorf("below the limit: %d nodes, want all 10", len(got))
	}
}

// TestRuleName: names stay within 63 characters and distinct.
func TestRuleName(t *testing.T) {
	if got := ruleName("default", "web", "TCP", true); got != "k8s.default.web.tcp.ipv4" {
		t.Errorf("got %q", got)
	}
	long := strings.Repeat("n", 63)
	a, b := ruleName(long, long, "TCP", true), ruleName(long, long, "TCP", false)
	if len(a) != 63 || len(b) != 63 || a == b {
		t.Errorf("long names %q %q", a, b)
	}
}
