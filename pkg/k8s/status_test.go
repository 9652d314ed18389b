package k8s

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func created(sec int) func(*corev1.Service) {
	return func(s *corev1.Service) { s.CreationTimestamp = metav1.NewTime(time.Unix(int64(1e9+sec), 0)) }
}

func requireDual(s *corev1.Service) {
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyRequireDualStack)
}

func loadBalancerIP(ip string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.LoadBalancerIP = ip }
}

// TestAllocate: which VIPs the leader gives, in the order Services were
// created. testPools: 203.0.113.65-66 (a /30 without network and
// broadcast) and fd00:203:113::100-101.
func TestAllocate(t *testing.T) {
	tests := []struct {
		name string
		svcs []*corev1.Service
		want []string // per Service: "ns/name: vips [! problem]"
	}{
		{
			name: "lowest free, oldest first",
			svcs: []*corev1.Service{service("d", "b", created(2)), service("d", "a", created(1))},
			want: []string{"d/a: 203.0.113.65", "d/b: 203.0.113.66"},
		},
		{
			name: "a held VIP stays",
			svcs: []*corev1.Service{service("d", "a", created(1)), service("d", "b", created(2), status("203.0.113.65"))},
			want: []string{"d/a: 203.0.113.66", "d/b: 203.0.113.65"},
		},
		{
			name: "a held VIP outside the pools is replaced",
			svcs: []*corev1.Service{service("d", "a", created(1), status("192.0.2.1"))},
			want: []string{"d/a: 203.0.113.65"},
		},
		{
			name: "two holders of one VIP: the older keeps it",
			svcs: []*corev1.Service{service("d", "a", created(1), status("203.0.113.66")), service("d", "b", created(2), status("203.0.113.66"))},
			want: []string{"d/a: 203.0.113.66", "d/b: 203.0.113.65"},
		},
		{
			name: "exhausted",
			svcs: []*corev1.Service{service("d", "a", created(1)), service("d", "b", created(2)), service("d", "c", created(3))},
			want: []string{"d/a: 203.0.113.65", "d/b: 203.0.113.66", "d/c: ! no VIP: the IPv4 pools are exhausted"},
		},
		{
			name: "requested by annotation, reserved against allocation",
			svcs: []*corev1.Service{service("d", "a", created(1)), service("d", "b", created(2), annotate(AnnotationLoadBalancerIPs, "203.0.113.65"))},
			want: []string{"d/a: 203.0.113.66", "d/b: 203.0.113.65"},
		},
		{
			name: "spec.loadBalancerIP, and a changed request moves the VIP",
			svcs: []*corev1.Service{service("d", "a", created(1), status("203.0.113.65"), loadBalancerIP("203.0.113.66"))},
			want: []string{"d/a: 203.0.113.66"},
		},
		{
			name: "a newer request does not take a held VIP",
			svcs: []*corev1.Service{service("d", "a", created(1), status("203.0.113.65")), service("d", "b", created(2), loadBalancerIP("203.0.113.65"))},
			want: []string{"d/a: 203.0.113.65", "d/b: ! no VIP: requested 203.0.113.65 is in use by Service d/a"},
		},
		{
			name: "requested outside the pools",
			svcs: []*corev1.Service{service("d", "a", created(1), loadBalancerIP("192.0.2.7"))},
			want: []string{"d/a: ! no VIP: requested 192.0.2.7 is in no pool of this controller"},
		},
		{
			name: "requested by two: the older gets it",
			svcs: []*corev1.Service{service("d", "a", created(1), loadBalancerIP("203.0.113.66")), service("d", "b", created(2), loadBalancerIP("203.0.113.66"))},
			want: []string{"d/a: 203.0.113.66", "d/b: ! no VIP: requested 203.0.113.66 is in use by Service d/a"},
		},
		{
			name: "a bad request keeps the held VIP",
			svcs: []*corev1.Service{service("d", "a", created(1), status("203.0.113.66"), annotate(AnnotationLoadBalancerIPs, "bogus"))},
			want: []string{`d/a: 203.0.113.66 ! annotation xlbnet.github.io/load-balancer-ips: "bogus" is not an IP address; the Service keeps its VIPs`},
		},
		{
			name: "dual-stack: one per family, in ipFamilies order",
			svcs: []*corev1.Service{service("d", "a", created(1), dualStack, func(s *corev1.Service) {
				s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
			})},
			want: []string{"d/a: fd00:203:113::100 203.0.113.65"},
		},
		{
			name: "RequireDualStack: both or none",
			svcs: []*corev1.Service{
				service("d", "a", created(1), requireDual), service("d", "b", created(2), requireDual),
				service("d", "c", created(3), requireDual),
			},
			want: []string{"d/a: 203.0.113.65 fd00:203:113::100", "d/b: 203.0.113.66 fd00:203:113::101",
				"d/c: ! no VIP: the IPv4 pools are exhausted; the IPv6 pools are exhausted (RequireDualStack: both families or none)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testController(t, nil)
			svcs := tc.svcs
			sortServices(svcs)
			got := c.allocate(svcs)
			var lines []string
			for _, s := range svcs {
				al := got[s.Namespace+"/"+s.Name]
				line := s.Namespace + "/" + s.Name + ":"
				for _, a := range al.vips {
					line += " " + a.String()
				}
				if al.problem != "" {
					line += " ! " + al.problem
				}
				lines = append(lines, line)
			}
			if strings.Join(lines, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestParsePool(t *testing.T) {
	tests := []struct{ in, want string }{
		{"203.0.113.64/30", "203.0.113.65-203.0.113.66"},
		{"203.0.113.64/31", "203.0.113.64-203.0.113.65"},
		{"203.0.113.7/32", "203.0.113.7-203.0.113.7"},
		{"203.0.113.10-203.0.113.20", "203.0.113.10-203.0.113.20"},
		{"fd00::/126", "fd00::-fd00::3"},
		{"203.0.113.65/30", "error: pool \"203.0.113.65/30\" has host bits set (203.0.113.64/30?)"},
		{"203.0.113.20-203.0.113.10", "error: pool \"203.0.113.20-203.0.113.10\": the range's ends must be of one family, first ≤ last"},
		{"203.0.113.1-fd00::1", "error: pool \"203.0.113.1-fd00::1\": the range's ends must be of one family, first ≤ last"},
		{"nonsense", "error: pool \"nonsense\": want a prefix or FIRST-LAST addresses"},
	}
	for _, tc := range tests {
		p, err := ParsePool(tc.in)
		got := fmt.Sprintf("%s-%s", p.First, p.Last)
		if err != nil {
			got = "error: " + err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.in, got, tc.want)
		}
	}
}
