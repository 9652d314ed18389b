package k8s

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// nodeInfo is what the rules need from a Node.
type nodeInfo struct {
	name         string
	addr4, addr6 netip.Addr // first InternalIP of each family
	zone         string
	// usable for externalTrafficPolicy Cluster: Ready, schedulable, not
	// being deleted; excluded: the exclude-from-external-load-balancers
	// label (no Service gets the node).
	usable, excluded bool
}

func newNodeInfo(n *corev1.Node) nodeInfo {
	ni := nodeInfo{name: n.Name, zone: n.Labels[LabelZone]}
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		ip = ip.Unmap()
		if ip.Is4() && !ni.addr4.IsValid() {
			ni.addr4 = ip
		} else if ip.Is6() && !ni.addr6.IsValid() {
			ni.addr6 = ip
		}
	}
	_, ni.excluded = n.Labels[LabelExcludeFromLB]
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	ni.usable = ready && !n.Spec.Unschedulable && n.DeletionTimestamp == nil
	return ni
}

func (n nodeInfo) addr(v4 bool) netip.Addr {
	if v4 {
		return n.addr4
	}
	return n.addr6
}

// notice is something to tell the Service's owner (an Event) that does not
// stop its rules.
type notice struct {
	warning         bool
	reason, message string
}

// ruleFile is one file the controller owns in rules_dir.
type ruleFile struct {
	name    string // file name, "k8s.default.web.tcp.ipv4.toml"
	service string // namespace/name
	content []byte
}

// serviceRules is a Service's translation.
type serviceRules struct {
	files   []ruleFile
	notices []notice
}

// endpointCounts counts, per node, the Service's endpoints of one family
// that are ready, serving and not terminating (nil ready and serving mean
// true, nil terminating false, as the EndpointSlice API says), each address
// once.
func endpointCounts(slices []*discoveryv1.EndpointSlice, v4 bool) map[string]int {
	want := discoveryv1.AddressTypeIPv6
	if v4 {
		want = discoveryv1.AddressTypeIPv4
	}
	seen := map[string]bool{}
	counts := map[string]int{}
	for _, s := range slices {
		if s.AddressType != want {
			continue
		}
		for _, ep := range s.Endpoints {
			c := ep.Conditions
			ready := c.Ready == nil || *c.Ready
			serving := ready
			if c.Serving != nil {
				serving = *c.Serving
			}
			if !ready || !serving || (c.Terminating != nil && *c.Terminating) || ep.NodeName == nil || len(ep.Addresses) == 0 {
				continue
			}
			if seen[ep.Addresses[0]] {
				continue
			}
			seen[ep.Addresses[0]] = true
			counts[*ep.NodeName]++
		}
	}
	return counts
}

// stableSubset keeps the max nodes of list with the lowest rendezvous score
// for the Service key: the same choice on every appliance, and a node that
// joins or leaves displaces at most one other.
func stableSubset(list []nodeInfo, key string, max int) []nodeInfo {
	if len(list) <= max {
		return list
	}
	score := func(n nodeInfo) uint64 {
		h := fnv.New64a()
		h.Write([]byte(key))
		h.Write([]byte{0})
		h.Write([]byte(n.name))
		return h.Sum64()
	}
	out := slices.Clone(list)
	slices.SortFunc(out, func(a, b nodeInfo) int {
		return cmp.Or(cmp.Compare(score(a), score(b)), strings.Compare(a.name, b.name))
	})
	out = out[:max]
	slices.SortFunc(out, func(a, b nodeInfo) int { return strings.Compare(a.name, b.name) })
	return out
}

// backend is one node in a rule.
type backend struct {
	node   string
	addr   netip.Addr
	zone   string
	weight int // 0: no static weight
}

// translate turns one Service (its VIPs already chosen) into rule files:
// one per VIP and protocol. An error means the Service's own settings are
// wrong (an annotation, a missing health-check port): its running rules
// stay and the error becomes an Event.
func (c *Controller) translate(svc *corev1.Service, vips []netip.Addr, nodes []nodeInfo, eps []*discoveryv1.EndpointSlice) (serviceRules, error) {
	var out serviceRules
	key := svc.Namespace + "/" + svc.Name
	weighted, err := wantsWeights(svc)
	if err != nil {
		return out, err
	}
	zonal, err := wantsZonalAffinity(svc)
	if err != nil {
		return out, err
	}
	ranges, err := sourceRanges(svc)
	if err != nil {
		return out, err
	}
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	if weighted && !local {
		out.notices = append(out.notices, notice{true, "WeightsIgnored",
			"weighted load balancing (pods-per-node) needs externalTrafficPolicy: Local; with Cluster a node forwards to Pods on other nodes, so per-node weights would not follow the Pods: every node gets an equal share"})
		weighted = false
	}
	if local && svc.Spec.HealthCheckNodePort == 0 {
		return out, fmt.Errorf("externalTrafficPolicy Local without spec.healthCheckNodePort: no health check can tell which nodes have ready endpoints")
	}
	ports := map[corev1.Protocol][]int32{}
	for _, p := range svc.Spec.Ports {
		switch p.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, "":
			proto := cmp.Or(p.Protocol, corev1.ProtocolTCP)
			ports[proto] = append(ports[proto], p.Port)
		default:
			out.notices = append(out.notices, notice{true, "ProtocolNotServed",
				fmt.Sprintf("port %d/%s is not served: xlb forwards TCP and UDP", p.Port, p.Protocol)})
		}
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && svc.Spec.SessionAffinityConfig != nil &&
		svc.Spec.SessionAffinityConfig.ClientIP != nil && svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != nil &&
		*svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != corev1.DefaultClientIPServiceAffinitySeconds {
		out.notices = append(out.notices, notice{false, "AffinityTimeoutIgnored",
			"sessionAffinityConfig.clientIP.timeoutSeconds applies inside the cluster only: the load balancer's CLIENT_IP affinity is a hash of the client address, without a timeout"})
	}
	for _, vip := range vips {
		v4 := vip.Is4()
		counts := endpointCounts(eps, v4)
		var chosen []nodeInfo
		for _, n := range nodes {
			if n.excluded || !n.addr(v4).IsValid() {
				continue
			}
			if local && counts[n.name] > 0 || !local && n.usable {
				chosen = append(chosen, n)
			}
		}
		limit := MaxClusterNodes
		if local {
			limit = MaxLocalNodes
		}
		var admitted []netip.Prefix
		for _, p := range ranges {
			if p.Addr().Is4() == v4 {
				admitted = append(admitted, p)
			}
		}
		if len(ranges) > 0 && len(admitted) == 0 {
			// No client of this family may reach the VIP: no rule, so
			// the appliance drops its packets (unmatched VIP traffic).
			out.notices = append(out.notices, notice{false, "SourceRangesExcludeFamily",
				fmt.Sprintf("loadBalancerSourceRanges has no %s prefix: no client reaches %s", familyName(vip), vip)})
			continue
		}
		chosen = stableSubset(chosen, key, limit)
		if len(chosen) == 0 {
			why := "no node is Ready and schedulable"
			if local {
				why = "no node has a ready endpoint"
			}
			out.notices = append(out.notices, notice{true, "NoBackends", fmt.Sprintf("%s: %s is not forwarded", why, vip)})
			continue
		}
		var bes []backend
		for _, n := range chosen {
			b := backend{node: n.name, addr: n.addr(v4), zone: n.zone}
			if weighted {
				b.weight = min(counts[n.name], 1000)
			}
			bes = append(bes, b)
		}
		for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP} {
			if len(ports[proto]) == 0 {
				continue
			}
			r := rule{
				service: key, class: c.opts.Class, vip: vip, protocol: string(proto), ports: ports[proto],
				clientIP: svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP,
				weighted: weighted, zonal: zonal, backends: bes, sourceRanges: admitted,
			}
			if local {
				r.hcPort, r.hcPath = int(svc.Spec.HealthCheckNodePort), "/"
			} else {
				r.hcPort, r.hcPath = proxyHealthPort, "/healthz"
			}
			r.name = ruleName(svc.Namespace, svc.Name, string(proto), v4)
			out.files = append(out.files, ruleFile{name: r.name + ".toml", service: key, content: c.render(r)})
		}
	}
	return out, nil
}

// proxyHealthPort is kube-proxy's health server (--healthz-bind-address),
// which answers /healthz 200 on a node whose proxy is in sync: the check of
// externalTrafficPolicy Cluster nodes, as GKE's.
const proxyHealthPort = 10256

// ruleName names a Service's rule so an operator sees where it came from:
// k8s.NAMESPACE.NAME.PROTOCOL.FAMILY (Kubernetes names have no dots). A
// name longer than a rule name may be (63) keeps its start and gets a hash
// of the whole.
func ruleName(namespace, name, proto string, v4 bool) string {
	fam := "ipv6"
	if v4 {
		fam = "ipv4"
	}
	n := fmt.Sprintf("k8s.%s.%s.%s.%s", namespace, name, strings.ToLower(proto), fam)
	if len(n) <= 63 {
		return n
	}
	h := fnv.New32a()
	h.Write([]byte(n))
	return n[:54] + "-" + strconv.FormatUint(uint64(h.Sum32())|1<<32, 16)[1:]
}
