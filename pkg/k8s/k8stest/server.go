package k8stest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// The server's address plan (doc.go), inside 198.18.0.0/15 and fd00::/8 and
// clear of pkg/lab's fabric (198.18.0.0/24), tunnel (198.18.1.0/24) and
// client (198.19.0.0/16) prefixes.
var (
	// APIAddr is where the apiserver listens (on its namespace's loopback).
	APIAddr = netip.MustParseAddr("198.18.250.9")
	// attachNet links the server's namespace to a lab router: .1 router, .2 server.
	attachRouter = netip.MustParseAddr("198.18.250.1")
	attachServer = netip.MustParseAddr("198.18.250.2")
	// ServiceCIDRs is the apiserver's service cluster IP range (dual-stack).
	ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("198.18.128.0/20"), netip.MustParsePrefix("fd00:18:128::/108")}
	// PodCIDRs is the cluster CIDR kube-proxy is told about; node i's pods
	// live in 198.18.(64+i).0/24 and fd00:18:64:i::/64 (see PodNet).
	PodCIDRs = []netip.Prefix{netip.MustParsePrefix("198.18.64.0/18"), netip.MustParsePrefix("fd00:18:64::/48")}
)

// APIPort is the apiserver's secure port.
const APIPort = 6443

// the interface names of an Attach: in the server's namespace and the router's.
const (
	attachServerLink = "lab0"
	attachRouterLink = "k8sapi"
)

// Server is a running kube-apiserver with etcd embedded.
type Server struct {
	NS    *netns.NS
	Dir   string // data directory (certificates, etcd, log)
	URL   string // https://198.18.250.9:6443
	Token string // bearer token in group system:masters
	CA    []byte // PEM of the CA that signed the serving certificate

	cmd    *exec.Cmd
	exited chan error
	logf   *os.File

	mu       sync.Mutex
	attached *netns.NS
}

// Options configure Start.
type Options struct {
	// Logf receives progress lines (nil: none).
	Logf func(format string, args ...any)
}

// Start runs an apiserver in a fresh namespace and data directory and waits
// until /readyz answers. Needs root.
func Start(ctx context.Context, b Bins, o Options) (_ *Server, err error) {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	dir, err := os.MkdirTemp("", "xlb-kubeapi-")
	if err != nil {
		return nil, err
	}
	ns, err := netns.New(testutil.Unique("xk8s"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{NS: ns, Dir: dir, URL: fmt.Sprintf("https://%s", net.JoinHostPort(APIAddr.String(), fmt.Sprint(APIPort))), exited: make(chan error, 1)}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if err := ns.Run("ip", "addr", "add", APIAddr.String()+"/32", "dev", "lo"); err != nil {
		return nil, err
	}
	p, err := writePKI(dir, []net.IP{APIAddr.AsSlice(), net.ParseIP("127.0.0.1"), net.ParseIP("198.18.128.1")},
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "localhost"})
	if err != nil {
		return nil, fmt.Errorf("apiserver certificates: %w", err)
	}
	s.Token, s.CA = p.adminToken, p.caPEM
	var cidrs []string
	for _, c := range ServiceCIDRs {
		cidrs = append(cidrs, c.String())
	}
	args := []string{
		"--embedded-etcd-dir=" + filepath.Join(dir, "etcd"),
		// etcd on the namespace's own loopback: no other test sees it.
		"--embedded-etcd-client-url=http://127.0.0.1:2379",
		"--embedded-etcd-peer-url=http://127.0.0.1:2380",
		"--bind-address=" + APIAddr.String(),
		"--advertise-address=" + APIAddr.String(),
		fmt.Sprintf("--secure-port=%d", APIPort),
		"--tls-cert-file=" + p.certFile,
		"--tls-private-key-file=" + p.keyFile,
		"--service-cluster-ip-range=" + strings.Join(cidrs, ","),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + p.saPubFile,
		"--service-account-signing-key-file=" + p.saKeyFile,
		"--token-auth-file=" + p.tokenAuthFile,
		"--authorization-mode=RBAC",
		"--enable-priority-and-fairness=false",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
	s.logf, err = os.Create(filepath.Join(dir, "apiserver.log"))
	if err != nil {
		return nil, err
	}
	s.cmd = ns.Command(b.APIServer, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.logf, s.logf
	// ip netns exec execs the binary: it dies with the test process.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	logf("kube-apiserver: starting in netns %s (data %s)", ns.Name, dir)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kube-apiserver: %w", err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	if err := s.waitReady(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	logf("kube-apiserver: ready at %s after %.1fs", s.URL, time.Since(start).Seconds())
	return s, nil
}

// waitReady polls /readyz until it answers 200.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	hc, err := s.httpClient()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case err := <-s.exited:
			s.exited <- err
			return fmt.Errorf("kube-apiserver exited (%v) before it was ready:\n%s", err, s.LogTail(40))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready after %v (%s):\n%s", timeout, last, s.LogTail(40))
		}
	}
}

// LogTail returns the last n lines of the apiserver's log.
func (s *Server) LogTail(n int) string {
	data, _ := os.ReadFile(filepath.Join(s.Dir, "apiserver.log"))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// dial opens a connection inside the server's namespace.
func (s *Server) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return nsDialer(s.NS)(ctx, network, addr)
}

func (s *Server) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CA) {
		return nil, errors.New("apiserver CA: no certificate")
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:     s.dial,
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}, nil
}

// Config is a client configuration for this process, as system:masters,
// dialling inside the server's namespace.
func (s *Server) Config() *rest.Config {
	return s.ConfigFor(s.Token)
}

// ConfigFor is Config with another bearer token (a service account's).
func (s *Server) ConfigFor(token string) *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.CA},
		Dial:            s.dial,
		QPS:             100,
		Burst:           200,
	}
}

// Client is a clientset on Config.
func (s *Server) Client(tb testing.TB) kubernetes.Interface {
	tb.Helper()
	c, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// Kubeconfig writes a kubeconfig file for processes in an attached lab, with
// token (Token when empty), and returns its path.
func (s *Server) Kubeconfig(path, token string) (string, error) {
	if token == "" {
		token = s.Token
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: lab
  user:
    token: %s
contexts:
- name: lab
  context: {cluster: lab, user: lab}
current-context: lab
`, s.URL, filepath.Join(s.Dir, "ca.crt"), token)
	return path, os.WriteFile(path, b.Bytes(), 0o600)
}

// Attach links the server's namespace to router (a lab's router namespace)
// so that every namespace routed through that router reaches APIAddr. One
// router at a time; detach removes the link (the router's end goes with it,
// or with the router's namespace).
func (s *Server) Attach(router *netns.NS) (detach func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attached != nil {
		return nil, fmt.Errorf("apiserver already attached to %s", s.attached.Name)
	}
	ns := s.NS
	_ = ns.Run("ip", "link", "del", attachServerLink) // a previous router's namespace may have died without Detach
	cmds := [][]string{
		{"ip", "link", "add", attachServerLink, "type", "veth", "peer", "name", attachRouterLink, "netns", router.Name},
		{"ip", "addr", "add", attachServer.String() + "/30", "dev", attachServerLink},
		{"ip", "link", "set", attachServerLink, "up"},
		{"ip", "route", "add", "198.18.0.0/15", "via", attachRouter.String()},
	}
	for _, c := range cmds {
		if err := ns.Run(c[0], c[1:]...); err != nil {
			return nil, err
		}
	}
	for _, c := range [][]string{
		{"ip", "addr", "add", attachRouter.String() + "/30", "dev", attachRouterLink},
		{"ip", "link", "set", attachRouterLink, "up"},
		{"ip", "route", "add", APIAddr.String() + "/32", "via", attachServer.String()},
	} {
		if err := router.Run(c[0], c[1:]...); err != nil {
			_ = ns.Run("ip", "link", "del", attachServerLink)
			return nil, err
		}
	}
	s.attached = router
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		_ = ns.Run("ip", "link", "del", attachServerLink)
		s.attached = nil
	}, nil
}

// Stop ends the apiserver (SIGTERM, SIGKILL after 15 s), deletes its
// namespace and data directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-s.exited:
			s.exited <- err
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	if s.logf != nil {
		s.logf.Close()
	}
	if s.NS != nil {
		_ = s.NS.Delete()
	}
	os.RemoveAll(s.Dir)
}

var shared struct {
	once sync.Once
	s    *Server
	err  error
}

// Shared returns the test package's apiserver, starting it on first use.
// It skips (or fails, see Binaries) without the binaries, and skips without
// root. TestMain must call Main so that it stops.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	testutil.RequireRoot(tb)
	b := Binaries(tb)
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		shared.s, shared.err = Start(ctx, b, Options{Logf: tb.Logf})
	})
	if shared.err != nil {
		tb.Fatalf("the package's apiserver: %v", shared.err)
	}
	return shared.s
}

// Main runs the tests and stops the shared apiserver afterwards:
// func TestMain(m *testing.M) { os.Exit(k8stest.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	if shared.s != nil {
		shared.s.Stop()
	}
	return code
}

// nsDialer dials inside ns.
func nsDialer(ns *netns.NS) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}
