package k8s

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xlbnet/xlb/pkg/config"
)

// Test fixtures: a cluster's objects built tersely.

func ptr[T any](v T) *T { return &v }

// node makes a Ready node with IPv4 (and IPv6 when v6 != "") InternalIPs;
// opts adjust it.
func node(name, v4, v6 string, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	if v4 != "" {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: v4})
	}
	if v6 != "" {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: v6})
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func zone(z string) func(*corev1.Node) { return func(n *corev1.Node) { n.Labels[LabelZone] = z } }
func excluded(n *corev1.Node)          { n.Labels[LabelExcludeFromLB] = "" }
func unschedulable(n *corev1.Node)     { n.Spec.Unschedulable = true }
func notReady(n *corev1.Node)          { n.Status.Conditions[0].Status = corev1.ConditionFalse }
func annotate(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}
func local(s *corev1.Service) {
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = 31999
}
func clientIP(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }
func dualStack(s *corev1.Service) {
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyPreferDualStack)
}
func udp(port int32) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("u%d", port), Protocol: corev1.ProtocolUDP, Port: port})
	}
}
func status(ips ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
	}
}

// service makes a TCP Service of our class on port 80 (and 443).
func service(ns, name string, opts ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			LoadBalancerClass:     ptr(DefaultClass),
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
			IPFamilyPolicy:        ptr(corev1.IPFamilyPolicySingleStack),
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80},
				{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443},
			},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// endpoints is an EndpointSlice of the Service with one ready endpoint per
// (node, address) pair given as "node=addr"; a "!" before the node makes
// the endpoint not ready, a "~" terminating.
func endpoints(ns, svc, slice string, fam discoveryv1.AddressType, eps ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: slice, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: fam,
	}
	for _, e := range eps {
		n, addr, _ := strings.Cut(e, "=")
		c := discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)}
		switch {
		case strings.HasPrefix(n, "!"):
			n, c.Ready, c.Serving = n[1:], ptr(false), ptr(false)
		case strings.HasPrefix(n, "~"):
			n, c.Ready, c.Terminating = n[1:], ptr(false), ptr(true)
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: ptr(n), Conditions: c})
	}
	return s
}

// testConfig writes an xlb.toml with rules_dir rules.d (and the files of
// rules, name → content) and returns its path.
func testConfig(t *testing.T, rules map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "rules.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "xlb.toml")
	if err := os.WriteFile(path, []byte("interface = \"eth0\"\nhash_seed = \"0x1\"\ncontrol_socket = \"xlb.sock\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for n, c := range rules {
		if err := os.WriteFile(filepath.Join(dir, "rules.d", n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

var testPools = Pools{mustPool("203.0.113.64/30"), mustPool("fd00:203:113::100-fd00:203:113::101")}

func mustPool(s string) Pool {
	p, err := ParsePool(s)
	if err != nil {
		panic(err)
	}
	return p
}

// summary is a loaded rule in one line, for table tests:
// "NAME VIP PROTO PORTS AFFINITY POLICY HC ENCAP [ZONAL] | group[zone]: backend[/weight] …",
// the zone left out when it is the group's name.
func summary(r config.Rule) string {
	var ports []string
	for _, p := range r.Ports.Ranges {
		ports = append(ports, fmt.Sprint(p.First))
	}
	s := fmt.Sprintf("%s %s %v %s %v %v %v:%d%s %v", r.Name, r.VIP, r.Protocol, strings.Join(ports, ","),
		r.SessionAffinity, r.LocalityLBPolicy, r.HealthCheck.Type, r.HealthCheck.Port, r.HealthCheck.RequestPath, r.Encap.Type)
	if len(r.SourceRanges) > 0 {
		var ps []string
		for _, p := range r.SourceRanges {
			ps = append(ps, p.String())
		}
		s += " src=" + strings.Join(ps, ",")
	}
	if r.ZonalAffinity.Mode != 0 {
		s += fmt.Sprintf(" %v/%g", r.ZonalAffinity.Mode, r.ZonalAffinity.SpilloverRatio)
	}
	for _, g := range r.Groups {
		s += " | " + g.Name + ":"
		if g.Zone != g.Name {
			s += "[" + g.Zone + "]"
		}
		for _, b := range g.Backends {
			s += " " + b.Addr.String()
			if b.HasWeight {
				s += fmt.Sprintf("/%d", b.Weight)
			}
		}
	}
	return s
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}
