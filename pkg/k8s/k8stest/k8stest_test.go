package k8stest_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/xlbnet/xlb/pkg/k8s/k8stest"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

func TestMain(m *testing.M) { os.Exit(k8stest.Main(m)) }

// TestProxyHealthCheckNodePort: a lab node running the real kube-proxy
// reaches the package's apiserver through the router; the Service's
// healthCheckNodePort answers 200 on the node's address while the node has
// a ready endpoint and 503 once the EndpointSlice is gone, as the xlb
// controller's Local health checks rely on.
func TestProxyHealthCheckNodePort(t *testing.T) {
	s := k8stest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, lab.Options{Prefix: testutil.Unique("k") + "-", Backends: 1, NoDecap: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	detach, err := s.Attach(l.Router)
	if err != nil {
		t.Fatal(err)
	}
	defer detach()

	c := s.Client(t)
	node := testutil.Unique("node")
	be := l.Backends[0]
	_, err = c.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: be.Link4.String()},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
	ns := testutil.Unique("ns")
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer c.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})

	kubeconfig, err := s.Kubeconfig(t.TempDir()+"/kubeconfig", "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := k8stest.StartProxy(ctx, k8stest.Binaries(t), be.NS, node, kubeconfig, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()

	svc, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Selector:              map[string]string{"app": "web"},
			Ports:                 []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.HealthCheckNodePort == 0 {
		t.Fatal("the apiserver allocated no healthCheckNodePort for a Local Service")
	}
	ready := true
	slice, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"198.18.64.10"},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			NodeName:   &node,
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://%s:%d/", be.Link4, svc.Spec.HealthCheckNodePort)
	waitStatus(t, ctx, l, url, http.StatusOK)
	if err := c.DiscoveryV1().EndpointSlices(ns).Delete(ctx, slice.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ctx, l, url, http.StatusServiceUnavailable)
}

// waitStatus polls url from the lab's router until it answers want.
func waitStatus(t *testing.T, ctx context.Context, l *lab.Lab, url string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, err := k8stest.HTTPStatus(ctx, l.Router, url)
		if code == want {
			t.Logf("%s: %d", url, code)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d (%v), want %d", url, code, err, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }
