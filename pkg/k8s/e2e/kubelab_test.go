package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/k8s/k8stest"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// pool is the VIP pool of the lab's controllers.
const pool = "203.0.113.64/27"

// Pod ports (the Services' targetPorts).
const (
	podHTTPPort = 8080
	podUDPPort  = 5353
)

// kubeLab is one test's cluster: its lab, namespace, class, nodes and
// appliances (doc.go).
type kubeLab struct {
	t          *testing.T
	api        *k8stest.Server
	bins       k8stest.Bins
	l          *lab.Lab
	c          kubernetes.Interface
	ns         string // the test's namespace (also the prefix of its node names)
	class      string // the test's loadBalancerClass: other tests' Services are not its
	lease      string
	nodes      []string
	proxies    []*k8stest.Proxy
	ctlConfig  string // kubeconfig of the controllers (the RBAC manifest's account)
	adminKC    string // kubeconfig of the kube-proxies
	dir        string
	mu         sync.Mutex
	podSeq     int
	appliances []*appliance
}

// newKubeLab builds the lab (o's backends are the nodes), attaches the
// apiserver, registers the nodes and, with proxies, starts their
// kube-proxies.
func newKubeLab(t *testing.T, o lab.Options, proxies bool) *kubeLab {
	t.Helper()
	testutil.RequireRoot(t)
	api := k8stest.Shared(t)
	bins := k8stest.Binaries(t)
	xlbBinary(t)
	o.NoDecap = true
	l := labWith(t, o)
	detach, err := api.Attach(l.Router)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(detach)
	k := &kubeLab{t: t, api: api, bins: bins, l: l, c: api.Client(t), dir: t.TempDir()}
	k.ns = testutil.Unique("t")
	k.class = "xlbnet.github.io/" + k.ns
	k.lease = "xlb-" + k.ns
	ctx := context.Background()
	if _, err := k.c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No controller-manager runs: a namespace never finishes deleting, so
	// the test deletes its Services (the kube-proxies of later tests must
	// not see their VIPs), slices and nodes itself.
	t.Cleanup(func() {
		if svcs, err := k.c.CoreV1().Services(k.ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, s := range svcs.Items {
				_ = k.c.CoreV1().Services(k.ns).Delete(ctx, s.Name, metav1.DeleteOptions{})
			}
		}
		_ = k.c.DiscoveryV1().EndpointSlices(k.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = k.c.CoreV1().Namespaces().Delete(ctx, k.ns, metav1.DeleteOptions{})
	})
	// The router routes the pool to the first appliance (a fleet's VIPs
	// come over BGP instead).
	if !o.BGP && o.Appliances <= 1 {
		if err := l.Router.Run("ip", "route", "add", pool, "via", l.XLBAddr4.String()); err != nil {
			t.Fatal(err)
		}
	}
	for i, be := range l.Backends {
		name := fmt.Sprintf("%s-n%d", k.ns, i)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: be.Link4.String()}, {Type: corev1.NodeInternalIP, Address: be.Link6.String()}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
		if _, err := k.c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}) })
		k.nodes = append(k.nodes, name)
		if err := be.NS.Run("sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
			t.Fatal(err)
		}
		for j, other := range l.Backends {
			if j != i {
				if err := be.NS.Run("ip", "route", "add", podNet(j).String(), "via", other.Link4.String()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if k.adminKC, err = api.Kubeconfig(filepath.Join(k.dir, "admin.kubeconfig"), ""); err != nil {
		t.Fatal(err)
	}
	k.ctlConfig = k.controllerKubeconfig()
	if !proxies {
		return k
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for i, be := range l.Backends {
		p, err := k8stest.StartProxy(pctx, bins, be.NS, k.nodes[i], k.adminKC, k.dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		k.proxies = append(k.proxies, p)
	}
	return k
}

// podNet is node i's pod prefix.
func podNet(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(64 + i), 0}), 24)
}

var rbacOnce struct {
	sync.Once
	err error
}

// controllerKubeconfig applies deploy/kubernetes/rbac.yaml (once per
// apiserver) and writes a kubeconfig with a token of its ServiceAccount:
// the controllers run with exactly the rights the manifest gives.
func (k *kubeLab) controllerKubeconfig() string {
	k.t.Helper()
	ctx := context.Background()
	rbacOnce.Do(func() { rbacOnce.err = applyManifest(ctx, k.c, "../../../deploy/kubernetes/rbac.yaml") })
	if rbacOnce.err != nil {
		k.t.Fatal(rbacOnce.err)
	}
	tr, err := k.c.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "xlb-k8s",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	path, err := k.api.Kubeconfig(filepath.Join(k.dir, "xlb-k8s.kubeconfig"), tr.Status.Token)
	if err != nil {
		k.t.Fatal(err)
	}
	return path
}

func ptrTo[T any](v T) *T { return &v }

// applyManifest creates every object of a multi-document YAML file (the
// kinds the RBAC manifest uses); existing ones are left as they are.
func applyManifest(ctx context.Context, c kubernetes.Interface, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		isComment := func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "#") }
		if strings.TrimSpace(strings.Join(slices.DeleteFunc(strings.Split(doc, "\n"), isComment), "")) == "" {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Secret:
			_, err = c.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = c.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			return fmt.Errorf("%s: unexpected %T", path, obj)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: create %T: %w", path, obj, err)
		}
	}
	return nil
}

// pod is a "pod": a namespace behind a node with an HTTP server on
// podHTTPPort and a UDP server on podUDPPort, both answering lab.Reply
// with the pod's name and the client address they saw.
type pod struct {
	name string
	node int
	ip   netip.Addr
	ns   *netns.NS
	stop func()
}

// startPod starts a pod on node i; it goes when the test ends, or with
// stop (which unplugs it from its node).
func (k *kubeLab) startPod(i int) *pod {
	k.t.Helper()
	k.mu.Lock()
	k.podSeq++
	seq := k.podSeq
	k.mu.Unlock()
	ns := testutil.NewNetNS(k.t, "xp")
	gw := podNet(i).Addr().Next()
	ip := podNet(i).Addr()
	for range 10 + seq {
		ip = ip.Next()
	}
	p := &pod{name: fmt.Sprintf("pod%d-node%d", seq, i), node: i, ip: ip, ns: ns}
	link := fmt.Sprintf("p%d", seq)
	node := k.l.Backends[i].NS
	for _, c := range [][]string{
		{"ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns.Name},
		{"ip", "addr", "add", gw.String() + "/32", "dev", link},
		{"ip", "link", "set", link, "up"},
		{"ip", "route", "add", ip.String() + "/32", "dev", link},
	} {
		if err := node.Run(c[0], c[1:]...); err != nil {
			k.t.Fatal(err)
		}
	}
	for _, c := range [][]string{
		{"ip", "addr", "add", ip.String() + "/32", "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "route", "add", gw.String(), "dev", "eth0"},
		{"ip", "route", "add", "default", "via", gw.String(), "dev", "eth0"},
	} {
		if err := ns.Run(c[0], c[1:]...); err != nil {
			k.t.Fatal(err)
		}
	}
	var ln net.Listener
	var uc *net.UDPConn
	err := ns.Do(func() error {
		var err error
		if ln, err = net.Listen("tcp", fmt.Sprintf(":%d", podHTTPPort)); err != nil {
			return err
		}
		uc, err = net.ListenUDP("udp", &net.UDPAddr{Port: podUDPPort})
		return err
	})
	if err != nil {
		k.t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		remote, _ := netip.ParseAddrPort(r.RemoteAddr)
		var local netip.AddrPort
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			local, _ = netip.ParseAddrPort(a.String())
		}
		json.NewEncoder(w).Encode(lab.Reply{Backend: p.name, Index: p.node, Remote: remote, Local: local})
	})}
	go srv.Serve(ln)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := uc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			// A dual-stack socket sees IPv4 clients as IPv4-mapped.
			remote := netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
			out, _ := json.Marshal(lab.Reply{Backend: p.name, Index: p.node, Remote: remote, Size: n})
			uc.WriteToUDPAddrPort(out, from)
		}
	}()
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			srv.Close()
			uc.Close()
			_ = node.Run("ip", "link", "del", link)
		})
	}
	k.t.Cleanup(p.stop)
	return p
}

// setEndpoints writes the Service's EndpointSlice (what the endpoint slice
// controller would, from ready pods): one ready endpoint per pod, on its
// node; terminating ones are listed with ready false, terminating true.
func (k *kubeLab) setEndpoints(svc string, ready []*pod, terminating ...*pod) {
	k.t.Helper()
	ctx := context.Background()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-lab", Namespace: k.ns, Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "xlb-e2e"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptrTo("http"), Protocol: ptrTo(corev1.ProtocolTCP), Port: ptrTo(int32(podHTTPPort))},
			{Name: ptrTo("dns"), Protocol: ptrTo(corev1.ProtocolUDP), Port: ptrTo(int32(podUDPPort))},
		},
	}
	add := func(p *pod, ready bool) {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{p.ip.String()},
			Conditions: discoveryv1.EndpointConditions{
				Ready: ptrTo(ready), Serving: ptrTo(ready), Terminating: ptrTo(!ready),
			},
			NodeName: ptrTo(k.nodes[p.node]),
		})
	}
	for _, p := range ready {
		add(p, true)
	}
	for _, p := range terminating {
		add(p, false)
	}
	old, err := k.c.DiscoveryV1().EndpointSlices(k.ns).Get(ctx, s.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = k.c.DiscoveryV1().EndpointSlices(k.ns).Create(ctx, s, metav1.CreateOptions{})
	case err == nil:
		s.ResourceVersion = old.ResourceVersion
		_, err = k.c.DiscoveryV1().EndpointSlices(k.ns).Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		k.t.Fatal(err)
	}
}

// createService creates a LoadBalancer Service of the test's class with
// port http 80/TCP → 8080 (and, withUDP, dns 53/UDP → 5353); mod changes it.
func (k *kubeLab) createService(name string, withUDP bool, mod func(*corev1.Service)) *corev1.Service {
	k.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.ns},
		Spec: corev1.ServiceSpec{
			Type:              corev1.ServiceTypeLoadBalancer,
			LoadBalancerClass: ptrTo(k.class),
			Selector:          map[string]string{"app": name},
			Ports:             []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(podHTTPPort)}},
		},
	}
	if withUDP {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(podUDPPort)})
	}
	if mod != nil {
		mod(svc)
	}
	out, err := k.c.CoreV1().Services(k.ns).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	return out
}

// service reads a Service of the test's namespace.
func (k *kubeLab) service(name string) *corev1.Service {
	k.t.Helper()
	svc, err := k.c.CoreV1().Services(k.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	return svc
}

// vipOf waits until the Service's status has a VIP and returns it.
func (k *kubeLab) vipOf(name string) netip.Addr {
	k.t.Helper()
	var vip netip.Addr
	testutil.WaitFor(k.t, time.Minute, name+"'s VIP in its status", func() (bool, string) {
		svc, err := k.c.CoreV1().Services(k.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(ing.IP); err == nil {
				vip = a
				return true, ing.IP
			}
		}
		return false, "no ingress yet"
	})
	return vip
}

// events lists the Events of a Service with a reason ("": every one).
func (k *kubeLab) events(t *testing.T, svc, reason string) []corev1.Event {
	t.Helper()
	l, err := k.c.CoreV1().Events(k.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + svc})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range l.Items {
		if reason == "" || e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// ruleName is the controller's name of a Service's rule.
func (k *kubeLab) ruleName(svc, proto string) string {
	return "k8s." + k.ns + "." + svc + "." + proto + ".ipv4"
}

// linkAddrs are the nodes' IPv4 addresses on the lab's bridge.
func (k *kubeLab) linkAddrs(nodes ...int) []netip.Addr {
	var out []netip.Addr
	for _, i := range nodes {
		out = append(out, k.l.Backends[i].Link4)
	}
	return out
}

// waitProxied waits until every running kube-proxy has programmed vip with
// the pods as its endpoints (its nftables ruleset names each). Its
// /healthz answers 200 before that, and until then a node rejects the
// VIP's packets (a Service without endpoints) or routes them away.
func (k *kubeLab) waitProxied(t *testing.T, vip netip.Addr, pods ...*pod) {
	t.Helper()
	for _, p := range k.proxies {
		testutil.WaitFor(t, time.Minute, fmt.Sprintf("kube-proxy of %s programs %s", p.Node, vip), func() (bool, string) {
			out, err := p.NS.Output("nft", "list", "ruleset")
			if err != nil {
				return false, err.Error()
			}
			var missing []string
			for _, want := range append([]string{vip.String()}, podAddrs(pods)...) {
				if !strings.Contains(out, want) {
					missing = append(missing, want)
				}
			}
			if len(missing) > 0 {
				return false, "missing " + strings.Join(missing, " ")
			}
			return true, fmt.Sprintf("with %d endpoints", len(pods))
		})
	}
}

func podAddrs(pods []*pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.ip.String())
	}
	return out
}

// appliance is one appliance: xlb run and xlb k8s in its namespace.
type appliance struct {
	k        *kubeLab
	ns       string
	dir, cfg string
	identity string
	xlb      *proc
	ctl      *proc
	args     []string
}

// startAppliance starts xlb run, then xlb k8s, on appliance i.
func (k *kubeLab) startAppliance(i int) *appliance {
	t := k.t
	t.Helper()
	la := k.l.Appliances[i]
	a := &appliance{k: k, ns: la.NS.Name, dir: t.TempDir(), identity: fmt.Sprintf("appliance-%d", i)}
	var err error
	if a.cfg, err = k.l.WriteConfigOn(la, a.dir, nil); err != nil {
		t.Fatal(err)
	}
	if a.xlb, err = startProc(t, a.ns, []string{"run", "-c", a.cfg}, "msg=serving", nil); err != nil {
		t.Fatal(err)
	}
	x := a.xlb
	t.Cleanup(func() {
		if err := x.Stop(); err != nil {
			t.Errorf("stop xlb run: %v", err)
		}
	})
	// Health checks every second, two failures: a node's change shows in
	// seconds. Short Lease times: a restarted controller leads again soon.
	a.args = []string{"k8s", "-c", a.cfg, "--kubeconfig", k.ctlConfig, "--class", k.class, "--pool", pool,
		"--encap", "DIRECT", "--health-check-interval", "1s", "--health-check-timeout", "1s", "--unhealthy-threshold", "2",
		"--identity", a.identity, "--lease-name", k.lease, "--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "500ms",
		"--debounce", "100ms", "--log-level", "debug"}
	a.startController()
	k.appliances = append(k.appliances, a)
	return a
}

func (a *appliance) startController() {
	t := a.k.t
	t.Helper()
	var err error
	if a.ctl, err = startProc(t, a.ns, a.args, "msg=serving", func(s string) { t.Logf("[%s k8s] %s", a.identity, s) }); err != nil {
		t.Fatal(err)
	}
	ctl := a.ctl
	t.Cleanup(func() {
		if err := ctl.Stop(); err != nil {
			t.Errorf("stop xlb k8s: %v", err)
		}
	})
}

// ruleFiles returns the appliance's rules_dir: name → content.
func (a *appliance) ruleFiles(t *testing.T) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(a.dir, "rules.d"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(a.dir, "rules.d", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(data)
	}
	return out
}

// status asks the appliance's daemon.
func (a *appliance) status(t *testing.T) *control.Status {
	t.Helper()
	cl := control.NewClient(filepath.Join(a.dir, "xlb.sock"))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cl.Status(ctx, control.StatusQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// rule is the daemon's view of one rule (nil: it has none of that name).
func (a *appliance) rule(t *testing.T, name string) *control.Rule {
	t.Helper()
	for _, r := range a.status(t).Rules {
		if r.Name == name {
			return &r
		}
	}
	return nil
}

// backends are the daemon's backends of rule r that the rule file lists:
// a node the controller took out stays in the daemon's view as REMOVED
// while its connections drain, and gets no new flow.
func backends(r *control.Rule) []control.Backend {
	return slices.DeleteFunc(slices.Clone(r.Backends), func(b control.Backend) bool { return b.Admin == "REMOVED" })
}

// waitBackends waits until the daemon's rule has exactly the backends all
// (addresses), of which exactly healthy are HEALTHY.
func (a *appliance) waitBackends(t *testing.T, rule string, all, healthy []netip.Addr) {
	t.Helper()
	strs := func(l []netip.Addr) []string {
		var out []string
		for _, x := range l {
			out = append(out, x.String())
		}
		slices.Sort(out)
		return out
	}
	wantAll, wantHealthy := strs(all), strs(healthy)
	testutil.WaitFor(t, time.Minute, fmt.Sprintf("%s: rule %s: backends %v, healthy %v", a.identity, rule, wantAll, wantHealthy), func() (bool, string) {
		r := a.rule(t, rule)
		if r == nil {
			return false, "no rule " + rule
		}
		var got, gotHealthy, desc []string
		for _, b := range backends(r) {
			got = append(got, b.Address)
			desc = append(desc, b.Address+"="+b.Health)
			if b.Health == "HEALTHY" {
				gotHealthy = append(gotHealthy, b.Address)
			}
		}
		slices.Sort(got)
		slices.Sort(gotHealthy)
		return slices.Equal(got, wantAll) && slices.Equal(gotHealthy, wantHealthy), strings.Join(desc, " ")
	})
}

// reloads counts the daemon's reload events.
func (a *appliance) reloads(t *testing.T) int {
	n := 0
	for _, e := range a.status(t).Events {
		if e.Kind == "reload" {
			n++
		}
	}
	return n
}

// settled waits until every pass the controller has started is done, so
// whatever it does about a change it has seen is done.
func (a *appliance) settled(t *testing.T) {
	t.Helper()
	started := a.ctl.log.count(`msg="pass start"`)
	testutil.WaitFor(t, time.Minute, a.identity+": the controller's passes done", func() (bool, string) {
		done := a.ctl.log.count(`msg="pass done"`)
		return done >= started, fmt.Sprintf("%d of %d", done, started)
	})
}

// ledPass waits until the controller has finished a pass as the leader.
func (a *appliance) ledPass(t *testing.T) {
	t.Helper()
	testutil.WaitFor(t, time.Minute, a.identity+": a pass as the leader", func() (bool, string) {
		return a.ctl.log.count("leading=true") > 0, ""
	})
}

// spread sends n HTTP requests to vip:80, each from another client
// address (a new flow each), and counts the answers per pod and per node;
// remotes counts the client addresses the pods saw. Failed requests are
// counted in errs, the first one kept.
func (k *kubeLab) spread(t *testing.T, vip netip.Addr, n int) (perPod map[string]int, perNode map[int]int, remotes map[netip.Addr]int, errs int, first error) {
	t.Helper()
	perPod, perNode, remotes = map[string]int{}, map[int]int{}, map[netip.Addr]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	url := "http://" + netip.AddrPortFrom(vip, 80).String() + "/"
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		src := k.l.ClientAddrs4[i%len(k.l.ClientAddrs4)]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rep, err := k.l.HTTPGet(ctx, src, url)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				if first == nil {
					first = err
				}
				return
			}
			perPod[rep.Backend]++
			perNode[rep.Index]++
			remotes[rep.Remote.Addr()]++
		}()
	}
	wg.Wait()
	return
}
