package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
)

// labRule is one forwarding rule the lab's xlb configuration gets.
type labRule struct {
	Name     string
	VIP      netip.Addr
	Protocol string // TCP, UDP, L3_DEFAULT
	Ports    string // TOML value: `["80"]` or `"ALL"`
	Encap    string // IPIP, GUE, GRE, DIRECT
	Extra    string // more TOML lines for the rule's top level
	Health   string // TOML body of [health_check]; "" = HTTP to the lab's health port
	// Backends are the lab backends (indexes) the rule lists; nil = all.
	Backends []int
}

// defaultLabRules serves HTTP on both VIPs and UDP (fragment-safe) on the
// IPv4 VIP, all with encapsulation encap.
func defaultLabRules(l *lab.Lab, encap string) []labRule {
	return []labRule{
		{Name: "web4", VIP: l.Opts.VIP4, Protocol: "TCP", Ports: fmt.Sprintf(`["%d"]`, l.Opts.HTTPPort), Encap: encap},
		{Name: "web6", VIP: l.Opts.VIP6, Protocol: "TCP", Ports: fmt.Sprintf(`["%d"]`, l.Opts.HTTPPort), Encap: encap},
		{Name: "udp4", VIP: l.Opts.VIP4, Protocol: "UDP", Ports: `"ALL"`, Encap: encap,
			Extra: "session_affinity = \"CLIENT_IP\"\n[connection_tracking]\ntracking_mode = \"PER_SESSION\"\n"},
	}
}

// writeLabConfig writes xlb.toml and rules.d/ for the lab into dir.
func writeLabConfig(dir string, l *lab.Lab, rules []labRule) (string, error) {
	if err := os.MkdirAll(filepath.Join(dir, "rules.d"), 0o755); err != nil {
		return "", err
	}
	main := fmt.Sprintf(`# xlb in the lab %q (written by xlb lab)
interface = %q
queues = "all"
hash_seed = "0x5eed1ab"
rules_dir = "rules.d"
state_file = %q
control_socket = %q
metrics_listen = ""
[conntrack]
max_entries = 262144
`, l.Opts.Prefix, lab.XLBInterface, filepath.Join(dir, "state.toml"), filepath.Join(dir, "xlb.sock"))
	path := filepath.Join(dir, "xlb.toml")
	if err := os.WriteFile(path, []byte(main), 0o644); err != nil {
		return "", err
	}
	for _, r := range rules {
		v4, v6 := l.BackendAddrs(r.Encap == "DIRECT")
		backends := v4
		if r.VIP.Is6() && !r.VIP.Is4In6() {
			backends = v6
		}
		if r.Backends != nil {
			var some []netip.Addr
			for _, i := range r.Backends {
				some = append(some, backends[i])
			}
			backends = some
		}
		var quoted []string
		for _, b := range backends {
			quoted = append(quoted, fmt.Sprintf("%q", b.String()))
		}
		health := r.Health
		if health == "" {
			health = fmt.Sprintf("type = \"HTTP\"\nport = %d\nrequest_path = \"/healthz\"\ninterval = \"1s\"\ntimeout = \"1s\"\nhealthy_threshold = 1\nunhealthy_threshold = 2\n", l.Opts.HealthPort)
		}
		// Extra may open tables; the top-level keys go first.
		top, tables, _ := strings.Cut(r.Extra, "[")
		if tables != "" {
			tables = "[" + tables
		}
		text := fmt.Sprintf(`name = %q
vip = %q
protocol = %q
ports = %s
%s
[encap]
type = %q
gue_port = %d

[health_check]
%s
[[group]]
name = "all"
backends = [%s]
%s`, r.Name, r.VIP.String(), r.Protocol, r.Ports, top, r.Encap, l.Opts.GUEPort, health, strings.Join(quoted, ", "), tables)
		if err := os.WriteFile(filepath.Join(dir, "rules.d", r.Name+".toml"), []byte(text), 0o644); err != nil {
			return "", err
		}
	}
	return path, nil
}

// lineBuffer keeps a process's output for error messages.
type lineBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *lineBuffer) add(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, s)
	if len(b.lines) > 200 {
		b.lines = b.lines[len(b.lines)-200:]
	}
}

func (b *lineBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// labXLB is an xlb daemon running in a lab's appliance namespace.
type labXLB struct {
	cmd    *exec.Cmd
	dir    string
	config string
	log    *lineBuffer
	exited chan error
}

// startLabXLB writes a configuration for rules and starts `xlb run` in the
// lab's xlb namespace (this same executable, under ip netns exec), and
// waits until it serves. The daemon's log lines go to logf.
func startLabXLB(ctx context.Context, l *lab.Lab, dir string, rules []labRule, logf func(string)) (*labXLB, error) {
	cfg, err := writeLabConfig(dir, l, rules)
	if err != nil {
		return nil, fmt.Errorf("write lab config: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", "netns", "exec", l.XLB.Name, self, "run", "-c", cfg)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	x := &labXLB{cmd: cmd, dir: dir, config: cfg, log: &lineBuffer{}, exited: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start xlb: %w", err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			x.log.add(line)
			if logf != nil {
				logf(line)
			}
			if strings.Contains(line, "msg=serving") {
				once.Do(func() { close(ready) })
			}
		}
		x.exited <- cmd.Wait()
	}()
	select {
	case <-ready:
		return x, nil
	case err := <-x.exited:
		return nil, fmt.Errorf("xlb exited before serving (%v):\n%s", err, x.log)
	case <-time.After(60 * time.Second):
		x.Stop()
		return nil, fmt.Errorf("xlb did not start serving within 60s:\n%s", x.log)
	case <-ctx.Done():
		x.Stop()
		return nil, ctx.Err()
	}
}

// Reload sends SIGHUP.
func (x *labXLB) Reload() error { return x.cmd.Process.Signal(syscall.SIGHUP) }

// Stop sends SIGTERM and waits (SIGKILL after 15 s). A clean exit is nil.
func (x *labXLB) Stop() error {
	if x.cmd.ProcessState != nil {
		return nil
	}
	_ = x.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-x.exited:
		x.exited <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("xlb exited with %v:\n%s", err, x.log)
		}
		return err
	case <-time.After(15 * time.Second):
		_ = x.cmd.Process.Kill()
		return fmt.Errorf("xlb did not stop within 15s after SIGTERM; killed:\n%s", x.log)
	}
}
