package k8stest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/xlbnet/xlb/pkg/netns"
)

// ProxyHealthPort is where kube-proxy answers /healthz (and where xlb checks
// the nodes of externalTrafficPolicy Cluster Services).
const ProxyHealthPort = 10256

// Proxy is a kube-proxy running in a node's namespace.
type Proxy struct {
	Node string
	NS   *netns.NS
	Log  string // its log file

	cmd    *exec.Cmd
	exited chan error
	logf   *os.File
}

// StartProxy runs kube-proxy (nftables mode) for node in ns, with the
// kubeconfig file at kubeconfig (Server.Kubeconfig; the namespace must reach
// the server, see Server.Attach), logging into dir, and waits until its
// /healthz answers. The Node object should exist (with its InternalIP):
// kube-proxy reads its addresses from it.
func StartProxy(ctx context.Context, b Bins, ns *netns.NS, node, kubeconfig, dir string) (_ *Proxy, err error) {
	var cidrs []string
	for _, c := range PodCIDRs {
		cidrs = append(cidrs, c.String())
	}
	p := &Proxy{Node: node, NS: ns, Log: filepath.Join(dir, "kube-proxy-"+node+".log"), exited: make(chan error, 1)}
	p.logf, err = os.Create(p.Log)
	if err != nil {
		return nil, err
	}
	p.cmd = ns.Command(b.Proxy,
		"--kubeconfig="+kubeconfig,
		"--proxy-mode=nftables",
		"--hostname-override="+node,
		fmt.Sprintf("--healthz-bind-address=0.0.0.0:%d", ProxyHealthPort),
		"--metrics-bind-address=127.0.0.1:10249",
		// The node's conntrack table is its namespace's; leave the
		// kernel-wide limits alone.
		"--conntrack-max-per-core=0",
		"--cluster-cidr="+strings.Join(cidrs, ","),
	)
	p.cmd.Stdout, p.cmd.Stderr = p.logf, p.logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		p.logf.Close()
		return nil, fmt.Errorf("start kube-proxy for %s: %w", node, err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	defer func() {
		if err != nil {
			p.Stop()
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		code, err := p.Healthz(ctx)
		if err == nil && code == http.StatusOK {
			return p, nil
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			return nil, fmt.Errorf("kube-proxy for %s exited (%v):\n%s", node, err, p.LogTail(30))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kube-proxy for %s: /healthz not 200 after 1m (%d, %v):\n%s", node, code, err, p.LogTail(30))
		}
	}
}

// Healthz asks the proxy's /healthz from inside its namespace and returns
// the HTTP status.
func (p *Proxy) Healthz(ctx context.Context) (int, error) {
	return HTTPStatus(ctx, p.NS, fmt.Sprintf("http://127.0.0.1:%d/healthz", ProxyHealthPort))
}

// HTTPStatus GETs url from inside ns and returns the status code.
func HTTPStatus(ctx context.Context, ns *netns.NS, url string) (int, error) {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: nsDialer(ns)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// LogTail returns the last n lines of the proxy's log.
func (p *Proxy) LogTail(n int) string {
	data, _ := os.ReadFile(p.Log)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop ends the proxy (SIGTERM, SIGKILL after 10 s). Its nftables table
// stays in the namespace until the namespace goes.
func (p *Proxy) Stop() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-p.exited:
			p.exited <- err
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	p.logf.Close()
}
