package k8s

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// allocation is the VIPs the leader decided for one Service.
type allocation struct {
	vips []netip.Addr // in the order of spec.ipFamilies
	// problem says why a family got no VIP ("" when all did).
	problem string
}

// families lists the families the Service wants VIPs of, in its order:
// spec.ipFamilies (IPv4 when empty). With PreferDualStack a family without
// a pool is left out; otherwise it is wanted (and reported when missing).
func (c *Controller) families(svc *corev1.Service) []bool {
	fams := svc.Spec.IPFamilies
	if len(fams) == 0 {
		fams = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	var out []bool
	prefer := svc.Spec.IPFamilyPolicy != nil && *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicyPreferDualStack
	for _, f := range fams {
		v4 := f == corev1.IPv4Protocol
		if prefer && len(fams) > 1 && !c.opts.Pools.HasFamily(v4) {
			continue
		}
		out = append(out, v4)
	}
	return out
}

// allocate decides every Service's VIPs, oldest Service first: a VIP it
// holds (in its status) stays while it is in a pool, of a family it wants,
// matches what it asks for and no older Service holds it; a family
// without one gets the requested address or the lowest free one of the
// pools. RequireDualStack gets both families or none.
func (c *Controller) allocate(svcs []*corev1.Service) map[string]allocation {
	used := map[netip.Addr]string{}
	out := map[string]allocation{}
	requests := map[string][]netip.Addr{}
	reqErr := map[string]error{}
	for _, svc := range svcs {
		key := svc.Namespace + "/" + svc.Name
		requests[key], reqErr[key] = requestedIPs(svc)
	}
	requested := func(key string, v4 bool) (netip.Addr, bool) {
		for _, a := range requests[key] {
			if a.Is4() == v4 {
				return a, true
			}
		}
		return netip.Addr{}, false
	}
	// First keep what Services hold (unless they now ask for another
	// address of that family).
	held := map[string][]netip.Addr{}
	for _, svc := range svcs {
		key := svc.Namespace + "/" + svc.Name
		for _, a := range c.statusVIPs(svc) {
			if r, ok := requested(key, a.Is4()); ok && r != a {
				continue
			}
			if _, taken := used[a]; taken {
				continue
			}
			used[a] = key
			held[key] = append(held[key], a)
		}
	}
	// Requested addresses nobody holds are reserved for their oldest
	// requester: the pools never hand them to another Service.
	reserved := map[netip.Addr]string{}
	for _, svc := range svcs {
		key := svc.Namespace + "/" + svc.Name
		for _, a := range requests[key] {
			if _, ok := reserved[a]; !ok && used[a] == "" {
				reserved[a] = key
			}
		}
	}
	for _, svc := range svcs {
		key := svc.Namespace + "/" + svc.Name
		if err := reqErr[key]; err != nil {
			// A bad request changes nothing: the held VIPs stay.
			out[key] = allocation{vips: held[key], problem: err.Error() + "; the Service keeps its VIPs"}
			continue
		}
		var al allocation
		var missing []string
		for _, v4 := range c.families(svc) {
			fam := "IPv6"
			if v4 {
				fam = "IPv4"
			}
			if i := slices.IndexFunc(held[key], func(a netip.Addr) bool { return a.Is4() == v4 }); i >= 0 {
				al.vips = append(al.vips, held[key][i])
				continue
			}
			if r, ok := requested(key, v4); ok {
				switch owner := used[r]; {
				case !c.opts.Pools.Contains(r):
					missing = append(missing, fmt.Sprintf("requested %s is in no pool of this controller", r))
				case owner != "":
					missing = append(missing, fmt.Sprintf("requested %s is in use by Service %s", r, owner))
				case reserved[r] != "" && reserved[r] != key:
					missing = append(missing, fmt.Sprintf("requested %s is also requested by the older Service %s", r, reserved[r]))
				default:
					used[r] = key
					al.vips = append(al.vips, r)
				}
				continue
			}
			if !c.opts.Pools.HasFamily(v4) {
				missing = append(missing, "no "+fam+" pool")
				continue
			}
			a, ok := c.opts.Pools.Lowest(v4, func(a netip.Addr) bool {
				_, u := used[a]
				_, r := reserved[a]
				return u || r
			})
			if !ok {
				missing = append(missing, "the "+fam+" pools are exhausted")
				continue
			}
			used[a] = key
			al.vips = append(al.vips, a)
		}
		if len(missing) > 0 {
			al.problem = "no VIP: " + strings.Join(missing, "; ")
			if svc.Spec.IPFamilyPolicy != nil && *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicyRequireDualStack {
				for _, a := range al.vips {
					if used[a] == key {
						delete(used, a)
					}
				}
				al.vips = nil
				al.problem += " (RequireDualStack: both families or none)"
			}
		}
		out[key] = al
	}
	return out
}

// updateStatuses (leader) writes each Service's VIPs into
// status.loadBalancer.ingress, with ipMode VIP: the nodes receive packets
// addressed to the VIP (passthrough), so kube-proxy must serve it.
func (c *Controller) updateStatuses(ctx context.Context, svcs []*corev1.Service, report func(key, reason, msg string)) {
	allocs := c.allocate(svcs)
	for _, svc := range svcs {
		key := svc.Namespace + "/" + svc.Name
		al := allocs[key]
		if al.problem != "" {
			report(key, "AllocationFailed", al.problem)
		}
		want := make([]corev1.LoadBalancerIngress, 0, len(al.vips))
		mode := corev1.LoadBalancerIPModeVIP
		for _, a := range al.vips {
			want = append(want, corev1.LoadBalancerIngress{IP: a.String(), IPMode: &mode})
		}
		if ingressEqual(svc.Status.LoadBalancer.Ingress, want) {
			continue
		}
		up := svc.DeepCopy()
		up.Status.LoadBalancer.Ingress = want
		if _, err := c.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, up, metav1.UpdateOptions{}); err != nil {
			c.log.Warn("status update", "service", key, "err", err)
			c.poke()
			continue
		}
		c.stats.StatusUpdates.Add(1)
		var ips []string
		for _, a := range al.vips {
			ips = append(ips, a.String())
		}
		c.log.Info("status written", "service", key, "vips", ips)
		if len(ips) > 0 {
			c.event(svc, corev1.EventTypeNormal, "VIPAssigned", "status.loadBalancer.ingress: "+strings.Join(ips, ", "))
		}
	}
}

func ingressEqual(a, b []corev1.LoadBalancerIngress) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].IP != b[i].IP || a[i].Hostname != "" || len(a[i].Ports) > 0 ||
			(a[i].IPMode == nil) != (b[i].IPMode == nil) || a[i].IPMode != nil && *a[i].IPMode != *b[i].IPMode {
			return false
		}
	}
	return true
}
