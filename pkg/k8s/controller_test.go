package k8s

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// running is a controller running on its own goroutine, with the reload
// replaced by a counter.
type running struct {
	*Controller
	dir     string // rules_dir
	reloads atomic.Int64
	cancel  context.CancelFunc
	done    chan error
}

// start runs a controller on client with xlb.toml at cfg (Offline: the
// test machine has no eth0), short debounce and lease timings.
func start(t *testing.T, client kubernetes.Interface, cfg, identity string, mod func(*Options)) *running {
	t.Helper()
	o := Options{
		Config: cfg, Offline: true, Pools: testPools, Encap: "DIRECT", Identity: identity,
		Debounce: 50 * time.Millisecond, LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{t, identity}, nil)),
	}
	if mod != nil {
		mod(&o)
	}
	c, err := New(client, o)
	if err != nil {
		t.Fatal(err)
	}
	r := &running{Controller: c, dir: filepath.Join(filepath.Dir(cfg), "rules.d"), done: make(chan error, 1)}
	c.reload = func(context.Context, bool) error { r.reloads.Add(1); return nil }
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	r.cancel()
	<-r.done
	r.done <- nil
}

type testWriter struct {
	t  *testing.T
	id string
}

var logMu sync.Mutex

func (w testWriter) Write(p []byte) (int, error) {
	logMu.Lock()
	defer logMu.Unlock()
	w.t.Logf("[%s] %s", w.id, strings.TrimSpace(string(p)))
	return len(p), nil
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settle waits until the controller has been idle for a while (no pass for
// 10 × debounce).
func (r *running) settle(t *testing.T) {
	t.Helper()
	last, since := r.stats.Passes.Load(), time.Now()
	for time.Since(since) < 10*r.opts.Debounce {
		time.Sleep(r.opts.Debounce)
		if n := r.stats.Passes.Load(); n != last {
			last, since = n, time.Now()
		}
	}
}

func (r *running) file(name string) string {
	data, _ := os.ReadFile(filepath.Join(r.dir, name))
	return string(data)
}

func (r *running) hasEvent(svc, reason, text string) bool {
	for _, e := range r.Events() {
		if e.Service == svc && e.Reason == reason && strings.Contains(e.Message, text) {
			return true
		}
	}
	return false
}

// TestControllerFake drives the whole loop on the client-go fake: VIP and
// status, files, one reload per burst, a bad annotation, a rejected rule, a
// foreign file, deletion and a restart that changes nothing. The same
// behaviours run against a real apiserver in cmd/xlb's Kubernetes tests.
func TestControllerFake(t *testing.T) {
	ctx := context.Background()
	operator := "# the operator's own rule\nname = \"op\"\nvip = \"203.0.113.66\"\nports = [\"80\"]\n[health_check]\ntype = \"TCP\"\n[[group]]\nname = \"a\"\nbackends = [\"192.0.2.10\"]\n"
	cfg := testConfig(t, map[string]string{"op.toml": operator})
	client := fake.NewClientset(
		node("n1", "198.18.0.100", "", zone("z1")),
		node("n2", "198.18.0.101", "", zone("z2")),
		node("n3", "198.18.0.102", "", excluded),
		service("default", "web", created(1)),
		service("default", "other-class", created(2), func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr("someone.else/lb") }),
		service("default", "classless", created(3), func(s *corev1.Service) { s.Spec.LoadBalancerClass = nil }),
	)
	r := start(t, client, cfg, "a1", nil)
	webFile := "k8s.default.web.tcp.ipv4.toml"
	eventually(t, "web's rule file", func() bool { return r.file(webFile) != "" })
	svc, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing := svc.Status.LoadBalancer.Ingress
	if len(ing) != 1 || ing[0].IP != "203.0.113.65" || ing[0].IPMode == nil || *ing[0].IPMode != corev1.LoadBalancerIPModeVIP {
		t.Fatalf("web's status: %+v", ing)
	}
	for _, want := range []string{`vip = "203.0.113.65"`, `"198.18.0.100", # n1`, `"198.18.0.101", # n2`, "port = 10256"} {
		if !strings.Contains(r.file(webFile), want) {
			t.Errorf("web's file lacks %q:\n%s", want, r.file(webFile))
		}
	}
	if strings.Contains(r.file(webFile), "198.18.0.102") {
		t.Errorf("the excluded node is a backend:\n%s", r.file(webFile))
	}
	for _, name := range []string{"other-class", "classless"} {
		s, _ := client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if len(s.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("%s is not ours but got status %+v", name, s.Status.LoadBalancer.Ingress)
		}
	}
	r.settle(t)
	if n := r.reloads.Load(); n != 1 {
		t.Errorf("%d reloads for the first Service, want 1", n)
	}

	t.Run("a burst of changes is one reload", func(t *testing.T) {
		before := r.reloads.Load()
		for i, n := range []string{"n1", "n2"} {
			nd, _ := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			nd.Labels["burst"] = "yes"
			nd.Status.Conditions[0].Status = corev1.ConditionFalse
			if i == 1 {
				nd.Status.Conditions[0].Status = corev1.ConditionTrue
			}
			if _, err := client.CoreV1().Nodes().Update(ctx, nd, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "n1 out of web's rule", func() bool { return !strings.Contains(r.file(webFile), "# n1") })
		r.settle(t)
		if n := r.reloads.Load() - before; n != 1 {
			t.Errorf("%d reloads for one burst, want 1", n)
		}
	})

	t.Run("a rule that does not validate keeps the running rules and gets an Event", func(t *testing.T) {
		// api gets 203.0.113.66, which the operator's op.toml forwards on
		// port 80 too: its rules are rejected, op.toml stays.
		before := r.reloads.Load()
		if _, err := client.CoreV1().Services("default").Create(ctx, service("default", "api", created(5)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "RulesRejected Event", func() bool { return r.hasEvent("default/api", "RulesRejected", "op.toml") })
		r.settle(t)
		if f := r.file("k8s.default.api.tcp.ipv4.toml"); f != "" {
			t.Errorf("the rejected rule was written:\n%s", f)
		}
		if r.file("op.toml") != operator {
			t.Error("the operator's file changed")
		}
		if n := r.reloads.Load() - before; n != 0 {
			t.Errorf("%d reloads, want none", n)
		}
	})

	t.Run("a bad annotation gets an Event and changes nothing", func(t *testing.T) {
		before, content := r.reloads.Load(), r.file(webFile)
		svc, _ := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		svc.Annotations = map[string]string{AnnotationZonalAffinity: "please"}
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP // would change the rule
		if _, err := client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "InvalidService Event", func() bool { return r.hasEvent("default/web", "InvalidService", `"please" is not "spill-cross-zone"`) })
		r.settle(t)
		if r.file(webFile) != content {
			t.Errorf("web's file changed:\n%s", r.file(webFile))
		}
		if n := r.reloads.Load() - before; n != 0 {
			t.Errorf("%d reloads, want none", n)
		}
		// Fixed, the change goes through.
		svc, _ = client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		svc.Annotations = nil
		if _, err := client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "CLIENT_IP in web's file", func() bool { return strings.Contains(r.file(webFile), `session_affinity = "CLIENT_IP"`) })
	})

	t.Run("a file of the same name not written by the controller is left alone", func(t *testing.T) {
		foreign := strings.ReplaceAll(strings.ReplaceAll(operator, "203.0.113.66", "192.0.2.99"), `"op"`, `"mine"`)
		if err := os.WriteFile(filepath.Join(r.dir, "k8s.default.db.tcp.ipv4.toml"), []byte(foreign), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().Services("default").Create(ctx, service("default", "db", created(6), loadBalancerIP("203.0.113.65")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// db asks for web's VIP: no VIP, and the conflict needs a VIP
		// first; give it api's request instead once api is gone.
		eventually(t, "AllocationFailed Event", func() bool { return r.hasEvent("default/db", "AllocationFailed", "in use by Service default/web") })
		if err := client.CoreV1().Services("default").Delete(ctx, "api", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(r.dir, "op.toml")); err != nil {
			t.Fatal(err)
		}
		svc, _ := client.CoreV1().Services("default").Get(ctx, "db", metav1.GetOptions{})
		svc.Spec.LoadBalancerIP = "203.0.113.66"
		if _, err := client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "RuleFileConflict Event", func() bool { return r.hasEvent("default/db", "RuleFileConflict", "k8s.default.db.tcp.ipv4.toml") })
		r.settle(t)
		if got := r.file("k8s.default.db.tcp.ipv4.toml"); got != foreign {
			t.Errorf("the foreign file changed:\n%s", got)
		}
	})

	t.Run("a deleted Service's rules go and its VIP is free", func(t *testing.T) {
		if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "web's file removed", func() bool { return r.file(webFile) == "" })
		if _, err := client.CoreV1().Services("default").Create(ctx, service("default", "next", created(7)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "next gets web's VIP", func() bool {
			s, _ := client.CoreV1().Services("default").Get(ctx, "next", metav1.GetOptions{})
			return len(s.Status.LoadBalancer.Ingress) == 1 && s.Status.LoadBalancer.Ingress[0].IP == "203.0.113.65"
		})
		eventually(t, "next's file", func() bool { return r.file("k8s.default.next.tcp.ipv4.toml") != "" })
	})

	t.Run("a restarted controller changes nothing", func(t *testing.T) {
		r.settle(t)
		before := snapshot(t, r.dir)
		r.stop()
		r2 := start(t, client, cfg, "a1", nil)
		eventually(t, "leading again", r2.IsLeader)
		r2.settle(t)
		if w, rm, rl, st := r2.stats.Writes.Load(), r2.stats.Removals.Load(), r2.reloads.Load(), r2.stats.StatusUpdates.Load(); w+rm+rl+st != 0 {
			t.Errorf("after a restart: %d writes, %d removals, %d reloads, %d status updates; want none", w, rm, rl, st)
		}
		if after := snapshot(t, r.dir); after != before {
			t.Errorf("rules_dir changed:\n%s\nthen\n%s", before, after)
		}
	})
}

// snapshot lists dir's files with their modification times and sizes.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(e.Name() + " " + fi.ModTime().String() + "\n")
	}
	return b.String()
}

// TestFleetFake: two controllers on one cluster write identical files;
// only the Lease holder writes status and Events.
func TestFleetFake(t *testing.T) {
	client := fake.NewClientset(
		node("n1", "198.18.0.100", "", zone("z1")),
		node("n2", "198.18.0.101", "", zone("z2")),
		service("default", "web", created(1), local, annotate(AnnotationWeighted, WeightedPodsPerNode)),
		endpoints("default", "web", "web-1", discoveryv1.AddressTypeIPv4, "n1=198.18.64.1", "n1=198.18.64.2", "n2=198.18.65.1"),
	)
	a := start(t, client, testConfig(t, nil), "a1", nil)
	eventually(t, "a1 leads", a.IsLeader)
	b := start(t, client, testConfig(t, nil), "a2", nil)
	name := "k8s.default.web.tcp.ipv4.toml"
	eventually(t, "both files", func() bool { return a.file(name) != "" && b.file(name) != "" })
	a.settle(t)
	b.settle(t)
	if a.file(name) != b.file(name) {
		t.Errorf("the appliances wrote different rules:\n%s\n%s", a.file(name), b.file(name))
	}
	if b.IsLeader() {
		t.Error("both lead")
	}
	if n := b.stats.StatusUpdates.Load(); n != 0 || len(b.Events()) != 0 {
		t.Errorf("the follower wrote %d statuses and %d Events", n, len(b.Events()))
	}
	if a.stats.StatusUpdates.Load() != 1 {
		t.Errorf("the leader wrote %d statuses, want 1", a.stats.StatusUpdates.Load())
	}
	// The leader goes: the other takes over and writes the next status.
	a.stop()
	eventually(t, "a2 leads", b.IsLeader)
	if _, err := client.CoreV1().Services("default").Create(context.Background(), service("default", "api", created(2)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "api's status from a2", func() bool { return b.stats.StatusUpdates.Load() == 1 })
}
