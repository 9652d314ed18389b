package e2e

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xlbnet/xlb/pkg/k8s"
	"github.com/xlbnet/xlb/pkg/k8s/k8stest"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestK8sControlPlane: the controller, as the RBAC manifest's
// ServiceAccount against a real apiserver, gives a Service a VIP from its
// pool (status.loadBalancer.ingress, ipMode VIP), writes its rule file
// (its nodes, kube-proxy's check) and the daemon serves it; a bad
// annotation gets an Event and changes nothing; a restarted controller
// changes nothing; a deleted Service's rule goes and its VIP is free for
// the next. No kube-proxy runs: nodes fail their checks, which this test
// does not need.
func TestK8sControlPlane(t *testing.T) {
	k := newKubeLab(t, lab.Options{Backends: 2}, false)
	a := k.startAppliance(0)
	k.createService("web", false, nil)
	vip := k.vipOf("web")
	if !netip.MustParsePrefix(pool).Contains(vip) {
		t.Errorf("VIP %s is not from the pool %s", vip, pool)
	}
	svc := k.service("web")
	if ing := svc.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IPMode == nil || *ing[0].IPMode != corev1.LoadBalancerIPModeVIP {
		t.Errorf("status.loadBalancer.ingress %+v: want one entry with ipMode VIP", ing)
	}
	rule := k.ruleName("web", "tcp")
	a.waitBackends(t, rule, k.linkAddrs(0, 1), nil)
	ruleFile := filepath.Join(a.dir, "rules.d", rule+".toml")
	file, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# xlb-k8s: class=" + k.class + " service=" + k.ns + "/web",
		fmt.Sprintf("vip = %q", vip),
		"port = 10256\nrequest_path = \"/healthz\"",
	} {
		if !strings.Contains(string(file), want) {
			t.Errorf("the rule file lacks %q:\n%s", want, file)
		}
	}
	if ev := k.events(t, "web", "RulesApplied"); len(ev) == 0 {
		t.Error("no RulesApplied Event on the Service")
	}

	t.Run("a bad annotation gets an Event and changes nothing", func(t *testing.T) {
		a.settled(t)
		before, _ := os.ReadFile(ruleFile)
		reloads := a.reloads(t)
		svc := k.service("web")
		svc.Annotations = map[string]string{k8s.AnnotationZonalAffinity: "nearby"}
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP // would change the rule
		if _, err := k.c.CoreV1().Services(k.ns).Update(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, time.Minute, "an InvalidService Event on web", func() (bool, string) {
			ev := k.events(t, "web", "InvalidService")
			return len(ev) > 0 && strings.Contains(ev[0].Message, `"nearby"`), fmt.Sprint(len(ev), " events")
		})
		a.settled(t)
		if after, _ := os.ReadFile(ruleFile); string(after) != string(before) {
			t.Errorf("the rule changed:\n%s", after)
		}
		if n := a.reloads(t); n != reloads {
			t.Errorf("%d reloads, want none", n-reloads)
		}
		if r := a.rule(t, rule); r == nil || r.Affinity == "CLIENT_IP" {
			t.Errorf("the daemon's rule changed: %+v", r)
		}
	})

	t.Run("a restarted controller changes nothing", func(t *testing.T) {
		a.settled(t)
		svc := k.service("web")
		before := a.ruleFiles(t)
		fi, err := os.Stat(ruleFile)
		if err != nil {
			t.Fatal(err)
		}
		reloads := a.reloads(t)
		if err := a.ctl.Stop(); err != nil {
			t.Fatal(err)
		}
		a.startController()
		a.ledPass(t)
		a.settled(t)
		if after := a.ruleFiles(t); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("rules_dir changed across a restart:\n%v\n%v", before, after)
		}
		if fi2, err := os.Stat(ruleFile); err != nil || !fi2.ModTime().Equal(fi.ModTime()) {
			t.Errorf("the rule file was rewritten (%v then %v, %v)", fi.ModTime(), fi2.ModTime(), err)
		}
		if n := a.reloads(t); n != reloads {
			t.Errorf("%d reloads, want none", n-reloads)
		}
		if svc2 := k.service("web"); svc2.ResourceVersion != svc.ResourceVersion {
			t.Errorf("the Service was written (resourceVersion %s then %s): %+v", svc.ResourceVersion, svc2.ResourceVersion, svc2.Status)
		}
	})

	t.Run("a deleted Service's rules go and its VIP is free", func(t *testing.T) {
		if err := k.c.CoreV1().Services(k.ns).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, time.Minute, "the rule gone from the daemon and rules_dir", func() (bool, string) {
			if a.rule(t, rule) != nil {
				return false, "still in the daemon"
			}
			_, err := os.Stat(ruleFile)
			return os.IsNotExist(err), fmt.Sprint(err)
		})
		k.createService("next", false, nil)
		if got := k.vipOf("next"); got != vip {
			t.Errorf("the next Service got %s, want the freed %s", got, vip)
		}
	})
}

// TestK8sLocal: externalTrafficPolicy Local sends only to the nodes with a
// ready endpoint, checked on the healthCheckNodePort that kube-proxy
// serves; the client's address reaches the pod, over TCP and UDP; it
// follows a pod that moves; and with pods-per-node the nodes' shares follow
// their pods (3:1 within 5σ).
func TestK8sLocal(t *testing.T) {
	k := newKubeLab(t, lab.Options{Backends: 3, ClientAddrs: 250}, true)
	a := k.startAppliance(0)
	p0, p1 := k.startPod(0), k.startPod(1)
	svc := k.createService("web", true, func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	k.setEndpoints("web", []*pod{p0, p1})
	vip := k.vipOf("web")
	k.waitProxied(t, vip, p0, p1)
	tcpRule, udpRule := k.ruleName("web", "tcp"), k.ruleName("web", "udp")
	// Every node is a backend only where it has an endpoint: node 2 has
	// none, so it is not in the rule at all.
	a.waitBackends(t, tcpRule, k.linkAddrs(0, 1), k.linkAddrs(0, 1))
	file := a.ruleFiles(t)[tcpRule+".toml"]
	if want := fmt.Sprintf("port = %d\nrequest_path = \"/\"", svc.Spec.HealthCheckNodePort); !strings.Contains(file, want) {
		t.Errorf("the rule does not check the healthCheckNodePort (%q):\n%s", want, file)
	}

	const n = 200
	perPod, perNode, remotes, errs, first := k.spread(t, vip, n)
	t.Logf("Local, pods on nodes 0 and 1: per pod %v, errors %d", perPod, errs)
	if errs > 0 {
		t.Fatalf("%d of %d requests failed: %v", errs, n, first)
	}
	if perNode[0] == 0 || perNode[1] == 0 || perNode[2] != 0 {
		t.Errorf("per node %v: want nodes 0 and 1 only, both", perNode)
	}
	for r := range remotes {
		if !slices.Contains(k.l.ClientAddrs4, r) {
			t.Errorf("a pod saw client address %s: Local must keep the client's", r)
		}
	}
	a.waitBackends(t, udpRule, k.linkAddrs(0, 1), k.linkAddrs(0, 1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := k.l.UDPWho(ctx, k.l.ClientAddrs4[7], netip.AddrPortFrom(vip, 53), 64)
	if err != nil {
		t.Fatalf("UDP through %s: %v", udpRule, err)
	}
	if rep.Remote.Addr() != k.l.ClientAddrs4[7] || rep.Index == 2 {
		t.Errorf("UDP answered by %s on node %d seeing %s", rep.Backend, rep.Index, rep.Remote)
	}

	t.Run("follows a pod that moves", func(t *testing.T) {
		moved := k.startPod(2)
		k.setEndpoints("web", []*pod{p0, moved}, p1) // p1 terminating
		k.waitProxied(t, vip, p0, moved)
		a.waitBackends(t, tcpRule, k.linkAddrs(0, 2), k.linkAddrs(0, 2))
		p1.stop()
		_, perNode, _, errs, first := k.spread(t, vip, n)
		t.Logf("after the move: per node %v, errors %d", perNode, errs)
		if errs > 0 {
			t.Fatalf("%d of %d requests failed: %v", errs, n, first)
		}
		if perNode[0] == 0 || perNode[2] == 0 || perNode[1] != 0 {
			t.Errorf("per node %v: want nodes 0 and 2 only, both", perNode)
		}
	})

	t.Run("pods-per-node weights", func(t *testing.T) {
		// Node 0: three pods; node 1: one.
		pods := []*pod{p0, k.startPod(0), k.startPod(0), k.startPod(1)}
		svc := k.service("web")
		svc.Annotations = map[string]string{k8s.AnnotationGKEWeighted: k8s.WeightedPodsPerNode}
		if _, err := k.c.CoreV1().Services(k.ns).Update(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		k.setEndpoints("web", pods)
		k.waitProxied(t, vip, pods...)
		want := []string{k.l.Backends[0].Link4.String() + "=3/HEALTHY", k.l.Backends[1].Link4.String() + "=1/HEALTHY"}
		testutil.WaitFor(t, time.Minute, "weights 3 and 1 in the daemon", func() (bool, string) {
			r := a.rule(t, tcpRule)
			if r == nil {
				return false, "no rule"
			}
			var ws []string
			for _, b := range backends(r) {
				ws = append(ws, fmt.Sprintf("%s=%d/%s", b.Address, b.WeightEffective, b.Health))
			}
			slices.Sort(ws)
			return slices.Equal(ws, want), strings.Join(ws, " ")
		})
		const n = 400
		_, perNode, _, errs, first := k.spread(t, vip, n)
		if errs > 0 {
			t.Fatalf("%d of %d requests failed: %v", errs, n, first)
		}
		share := float64(perNode[0]) / n
		sd := math.Sqrt(0.75 * 0.25 / n)
		t.Logf("weights 3:1: node 0 served %d of %d (%.1f%%, want 75%% ± %.1f%% = 5σ), node 1 %d", perNode[0], n, 100*share, 500*sd, perNode[1])
		if math.Abs(share-0.75) > 5*sd || perNode[0]+perNode[1] != n {
			t.Errorf("per node %v: node 0's share %.3f is not 0.75 ± %.3f", perNode, share, 5*sd)
		}
	})
}

// TestK8sCluster: externalTrafficPolicy Cluster uses every node (traffic
// enters through each and kube-proxy forwards it to the one pod), checked on
// kube-proxy's :10256/healthz: a node whose kube-proxy stops answers no
// more checks and gets no new flows, and is used again once it answers.
func TestK8sCluster(t *testing.T) {
	k := newKubeLab(t, lab.Options{Backends: 3, ClientAddrs: 250}, true)
	a := k.startAppliance(0)
	p0 := k.startPod(0)
	k.createService("web", false, nil)
	k.setEndpoints("web", []*pod{p0})
	vip := k.vipOf("web")
	k.waitProxied(t, vip, p0)
	rule := k.ruleName("web", "tcp")
	all := k.linkAddrs(0, 1, 2)
	a.waitBackends(t, rule, all, all)
	if f := a.ruleFiles(t)[rule+".toml"]; !strings.Contains(f, "port = 10256\nrequest_path = \"/healthz\"") {
		t.Errorf("the rule does not check kube-proxy's health port:\n%s", f)
	}
	// kube-proxy masquerades Cluster traffic: the pod sees the address of
	// the node the packet entered (node 0's side of the pod's veth when it
	// entered there).
	entry := map[netip.Addr]int{podNet(0).Addr().Next(): 0, k.l.Backends[1].Link4: 1, k.l.Backends[2].Link4: 2}
	entered := func(remotes map[netip.Addr]int) map[int]int {
		out := map[int]int{}
		for r, n := range remotes {
			i, ok := entry[r]
			if !ok {
				t.Errorf("the pod saw %s, no node's address", r)
				continue
			}
			out[i] += n
		}
		return out
	}
	const n = 150
	perPod, _, remotes, errs, first := k.spread(t, vip, n)
	if errs > 0 {
		t.Fatalf("%d of %d requests failed: %v", errs, n, first)
	}
	in := entered(remotes)
	t.Logf("Cluster: per pod %v, entered through node %v", perPod, in)
	if perPod[p0.name] != n || len(in) != 3 {
		t.Errorf("want every request served by %s after entering through each of the 3 nodes: per pod %v, per node %v", p0.name, perPod, in)
	}

	t.Run("kube-proxy's health check decides", func(t *testing.T) {
		k.proxies[2].Stop()
		a.waitBackends(t, rule, all, k.linkAddrs(0, 1))
		_, _, remotes, errs, first := k.spread(t, vip, n)
		if errs > 0 {
			t.Fatalf("%d of %d requests failed: %v", errs, n, first)
		}
		if in := entered(remotes); in[2] != 0 || in[0] == 0 || in[1] == 0 {
			t.Errorf("node 2's kube-proxy is down but it still got new flows, or another node got none: %v", in)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		p, err := k8stest.StartProxy(ctx, k.bins, k.l.Backends[2].NS, k.nodes[2], k.adminKC, k.dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		a.waitBackends(t, rule, all, all)
	})
}

// TestK8sFleet: two appliances behind the router (BGP, ECMP) each run xlb
// and the controller; they write byte-identical rules whose Maglev tables
// agree, one of them (the Lease holder) writes the status and Events, the
// router routes the VIP to both, and clients get through to both nodes.
func TestK8sFleet(t *testing.T) {
	k := newKubeLab(t, lab.Options{Backends: 2, Appliances: 2, BGP: true, ClientAddrs: 200}, true)
	a0, a1 := k.startAppliance(0), k.startAppliance(1)
	p0, p1 := k.startPod(0), k.startPod(1)
	k.createService("web", false, func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	k.setEndpoints("web", []*pod{p0, p1})
	vip := k.vipOf("web")
	k.waitProxied(t, vip, p0, p1)
	rule := k.ruleName("web", "tcp")
	for _, a := range []*appliance{a0, a1} {
		a.waitBackends(t, rule, k.linkAddrs(0, 1), k.linkAddrs(0, 1))
	}
	f0, f1 := a0.ruleFiles(t), a1.ruleFiles(t)
	if fmt.Sprint(f0) != fmt.Sprint(f1) || len(f0) != 1 {
		t.Errorf("the appliances wrote different rules:\n%v\n%v", f0, f1)
	}
	if d0, d1 := a0.rule(t, rule).TableDigest, a1.rule(t, rule).TableDigest; d0 == "" || d0 != d1 {
		t.Errorf("table digests differ: %q and %q", d0, d1)
	}
	lease, err := k.c.CoordinationV1().Leases("kube-system").Get(context.Background(), k.lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leader := *lease.Spec.HolderIdentity
	if leader != a0.identity && leader != a1.identity {
		t.Fatalf("the Lease is held by %q", leader)
	}
	ev := k.events(t, "web", "")
	if len(ev) == 0 {
		t.Error("no Events on the Service")
	}
	for _, e := range ev {
		if e.Source.Host != leader {
			t.Errorf("Event %s from %q, not the leader %q", e.Reason, e.Source.Host, leader)
		}
	}
	if ing := k.service("web").Status.LoadBalancer.Ingress; len(ing) != 1 {
		t.Errorf("%d ingress entries, want 1: %+v", len(ing), ing)
	}
	for _, a := range []*appliance{a0, a1} {
		wrote := a.ctl.log.count("status written") > 0
		if wrote != (a.identity == leader) {
			t.Errorf("%s (leader %q) wrote status: %v", a.identity, leader, wrote)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := k.l.WaitNexthops(ctx, vip, k.l.ApplianceAddrs(false)); err != nil {
		t.Fatalf("the router's route to %s: %v", vip, err)
	}
	const n = 100
	_, perNode, _, errs, first := k.spread(t, vip, n)
	if errs > 0 || perNode[0] == 0 || perNode[1] == 0 {
		t.Errorf("through the fleet: per node %v, %d of %d failed (%v)", perNode, errs, n, first)
	}
}
