package k8s

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/xlbnet/xlb/pkg/config"
)

// The names this controller reads (deploy/kubernetes.md documents each).
const (
	// DefaultClass is the spec.loadBalancerClass the controller serves
	// unless told otherwise.
	DefaultClass = "xlbnet.github.io/xlb"

	// AnnotationLoadBalancerIPs asks for VIPs: a comma-separated list of at
	// most one address per family, each inside a pool. It takes precedence
	// over spec.loadBalancerIP (deprecated upstream, single-stack).
	AnnotationLoadBalancerIPs = "xlbnet.github.io/load-balancer-ips"
	// AnnotationWeighted = "pods-per-node" weights each node by its ready,
	// serving, non-terminating endpoints (externalTrafficPolicy Local).
	AnnotationWeighted = "xlbnet.github.io/weighted-load-balancing"
	// AnnotationGKEWeighted is GKE's name for the same switch, honoured so
	// that a manifest written for GKE keeps its meaning.
	AnnotationGKEWeighted = "networking.gke.io/weighted-load-balancing"
	// AnnotationZonalAffinity = "spill-cross-zone" turns zonal affinity on:
	// ZONAL_AFFINITY_SPILL_CROSS_ZONE with spillover ratio 0, as GKE sets.
	AnnotationZonalAffinity = "xlbnet.github.io/zonal-affinity"

	// WeightedPodsPerNode is the one value of the weighted annotations.
	WeightedPodsPerNode = "pods-per-node"
	// ZonalSpillCrossZone is the one value of AnnotationZonalAffinity.
	ZonalSpillCrossZone = "spill-cross-zone"

	// AnnotationSourceRanges is the older form of
	// spec.loadBalancerSourceRanges (comma-separated prefixes), read when
	// the field is empty, as kube-proxy does.
	AnnotationSourceRanges = corev1.AnnotationLoadBalancerSourceRangesKey

	// LabelExcludeFromLB keeps a node out of every Service's backends
	// (its presence, whatever its value, as upstream's service controller).
	LabelExcludeFromLB = "node.kubernetes.io/exclude-from-external-load-balancers"
	// LabelZone is the node's zone.
	LabelZone = corev1.LabelTopologyZone
)

// wantsWeights reads the weighted annotations: true for pods-per-node,
// false when absent, an error for any other value.
func wantsWeights(svc *corev1.Service) (bool, error) {
	on := false
	for _, key := range []string{AnnotationWeighted, AnnotationGKEWeighted} {
		v, ok := svc.Annotations[key]
		if !ok {
			continue
		}
		if v != WeightedPodsPerNode {
			return false, fmt.Errorf("annotation %s: %q is not %q (the only weighting offered)", key, v, WeightedPodsPerNode)
		}
		on = true
	}
	return on, nil
}

// wantsZonalAffinity reads AnnotationZonalAffinity.
func wantsZonalAffinity(svc *corev1.Service) (bool, error) {
	v, ok := svc.Annotations[AnnotationZonalAffinity]
	if !ok {
		return false, nil
	}
	if v != ZonalSpillCrossZone {
		return false, fmt.Errorf("annotation %s: %q is not %q (ZONAL_AFFINITY_SPILL_CROSS_ZONE, ratio 0, as GKE sets)", AnnotationZonalAffinity, v, ZonalSpillCrossZone)
	}
	return true, nil
}

// requestedIPs returns the VIPs the Service asks for, at most one per
// family: from AnnotationLoadBalancerIPs, else spec.loadBalancerIP.
func requestedIPs(svc *corev1.Service) ([]netip.Addr, error) {
	src, text := "spec.loadBalancerIP", svc.Spec.LoadBalancerIP
	if v, ok := svc.Annotations[AnnotationLoadBalancerIPs]; ok {
		src, text = "annotation "+AnnotationLoadBalancerIPs, v
	}
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	var out []netip.Addr
	for _, f := range strings.Split(text, ",") {
		a, err := netip.ParseAddr(strings.TrimSpace(f))
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%s: %q is not an IP address", src, strings.TrimSpace(f))
		}
		a = a.Unmap()
		for _, b := range out {
			if b.Is4() == a.Is4() {
				return nil, fmt.Errorf("%s: two %s addresses (%s, %s); one per family", src, familyName(a), b, a)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// sourceRanges reads spec.loadBalancerSourceRanges, else the annotation:
// the client prefixes admitted (none: every client), host bits cleared
// (the apiserver accepts "198.51.100.7/24", xlb's rules want the prefix),
// sorted, each once.
func sourceRanges(svc *corev1.Service) ([]netip.Prefix, error) {
	src, list := "spec.loadBalancerSourceRanges", svc.Spec.LoadBalancerSourceRanges
	if len(list) == 0 {
		if v := strings.TrimSpace(svc.Annotations[AnnotationSourceRanges]); v != "" {
			src, list = "annotation "+AnnotationSourceRanges, strings.Split(v, ",")
		}
	}
	var out []netip.Prefix
	for _, s := range list {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a prefix", src, strings.TrimSpace(s))
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	out = slices.Compact(out)
	if len(out) > config.MaxSourceRanges {
		return nil, fmt.Errorf("%s: %d prefixes, more than a rule takes (%d)", src, len(out), config.MaxSourceRanges)
	}
	return out, nil
}
