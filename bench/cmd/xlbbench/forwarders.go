package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// forwarder is a running forwarder: its process (0 for nft, which runs
// in the kernel) and how to stop it.
type forwarder struct {
	pid  int
	stop func() error
	// handedTo is the process that took over from this one (`xlb
	// restart`): it holds the log's pipe now and is the one to stop.
	handedTo atomic.Int64
	// ready is the log line that said it was ready.
	ready string
	// reloaded is the latest "msg=reloaded" line, and a channel poked when
	// one comes (the daemon says there how long a reload took).
	mu       sync.Mutex
	reloaded string
	reloads  chan struct{}
	// Log lines that say "too many open files" (the process ran out of
	// descriptors), and xlb's warnings that health probes started late.
	emfileLines, lateProbeLines int
	// healthLine is xlb's "health checks" line: how many probers it
	// started for how many checked backends of rules.
	healthLine string
}

// handOver records that process pid took over from this one: the log
// comes from it now, and stop signals it.
func (f *forwarder) handOver(pid int) {
	f.handedTo.Store(int64(pid))
	f.pid = pid
}

// awaitGone waits up to d for process pid to be gone or a zombie, and
// says whether it is.
func awaitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if gone(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gone says whether process pid has ended: no longer listed, or a
// zombie waiting for its parent.
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f, err := procStatFields(string(b))
	if err != nil || len(f) == 0 {
		return false
	}
	return f[0] == "Z" || f[0] == "X"
}

// healthChecks returns xlb's "health checks" line ("" before it came).
func (f *forwarder) healthChecks() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.healthLine
}

// logCounts returns the counts of the log lines watched for.
func (f *forwarder) logCounts() (emfile, lateProbes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.emfileLines, f.lateProbeLines
}

// lastReload returns the latest "msg=reloaded" line, waiting up to
// timeout for one after the line prev.
func (f *forwarder) lastReload(prev string, timeout time.Duration) string {
	deadline := time.After(timeout)
	for {
		f.mu.Lock()
		l := f.reloaded
		f.mu.Unlock()
		if l != prev {
			return l
		}
		select {
		case <-f.reloads:
		case <-deadline:
			return ""
		}
	}
}

// Stop stops the forwarder; a failure is reported, not returned (the
// measurements are taken).
func (f *forwarder) Stop(name string) {
	if err := f.stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop %s: %v\n", name, err)
	}
}

// startReflector runs `xlbbench reflect` in the appliance namespace.
func startReflector(t *topo) (*forwarder, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var macs []string
	for _, m := range t.sinkMAC {
		macs = append(macs, m.String())
	}
	cmd := exec.Command("ip", "netns", "exec", t.ns("app"), self, "reflect", "--dev", "eth0",
		"--queues", strconv.Itoa(t.queues), "--sink-macs", strings.Join(macs, ","))
	return startAndWait(cmd, "reflector ready", nil)
}

// startXLB writes a configuration (one TCP rule for the VIP's port, DIRECT
// to the two sinks, no health probes), with extra appended to xlb.toml,
// and runs `xlb run` in the appliance.
func startXLB(t *topo, xlb, extra string) (*forwarder, error) {
	dir, err := os.MkdirTemp("", "xlbbench-")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "rules.d"), 0o755); err != nil {
		return nil, err
	}
	main := fmt.Sprintf(`# written by xlbbench
interface = "eth0"
queues = "all"
hash_seed = "0x1ab5eed"
rules_dir = "rules.d"
state_file = %q
control_socket = %q
metrics_listen = ""
[conntrack]
max_entries = 1048576
`, filepath.Join(dir, "state.toml"), filepath.Join(dir, "xlb.sock"))
	if extra != "" {
		// Top-level keys must come before the first table.
		main = strings.Replace(main, "[conntrack]", extra+"\n[conntrack]", 1)
	}
	var backends []string
	for i := range nSinks {
		backends = append(backends, strconv.Quote(sinkAddr(i)))
	}
	rule := fmt.Sprintf(`name = "bench"
vip = %q
protocol = "TCP"
ports = ["%d"]

[encap]
type = "DIRECT"

[health_check]
type = "NONE"

[[group]]
name = "sinks"
backends = [%s]
`, vipAddr, vipPort, strings.Join(backends, ", "))
	cfg := filepath.Join(dir, "xlb.toml")
	if err := os.WriteFile(cfg, []byte(main), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.d", "bench.toml"), []byte(rule), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", "netns", "exec", t.ns("app"), xlb, "run", "-c", cfg)
	return startAndWait(cmd, "msg=serving", func() { os.RemoveAll(dir) })
}

// startAndWait starts cmd and waits for a line containing ready on its
// stdout or stderr; stop sends SIGTERM and waits. `ip netns exec` execs
// the command in place, so cmd's process is the forwarder itself.
func startAndWait(cmd *exec.Cmd, ready string, cleanup func()) (*forwarder, error) {
	return startAndWaitFor(cmd, ready, cleanup, 60*time.Second, nil)
}

// startAndWaitFor is startAndWait with the time cmd has to get ready.
func startAndWaitFor(cmd *exec.Cmd, ready string, cleanup func(), timeout time.Duration, logTo io.Writer) (*forwarder, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pw.Close()
		pr.Close()
		return nil, err
	}
	pw.Close()
	var log strings.Builder
	readyCh := make(chan struct{})
	var readyLine string
	f := &forwarder{pid: cmd.Process.Pid, reloads: make(chan struct{}, 1)}
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		closed := false
		var tail []string
		for sc.Scan() {
			if logTo != nil {
				fmt.Fprintln(logTo, sc.Text())
			}
			// The first lines say how it started, the last why it
			// stopped (a panic): keep both, 32 KiB each.
			if log.Len() < 1<<15 {
				log.WriteString(sc.Text() + "\n")
			} else {
				tail = append(tail, sc.Text())
				if len(tail) > 256 {
					tail = tail[1:]
				}
			}
			if l := sc.Text(); strings.Contains(l, "too many open files") || strings.Contains(l, "health probes started late") {
				f.mu.Lock()
				if strings.Contains(l, "too many open files") {
					f.emfileLines++
				} else {
					f.lateProbeLines++
				}
				f.mu.Unlock()
			}
			if strings.Contains(sc.Text(), `msg="health checks"`) {
				f.mu.Lock()
				f.healthLine = sc.Text()
				f.mu.Unlock()
			}
			if strings.Contains(sc.Text(), "msg=reloaded") {
				f.mu.Lock()
				f.reloaded = sc.Text()
				f.mu.Unlock()
				select {
				case f.reloads <- struct{}{}:
				default:
				}
			}
			if !closed && strings.Contains(sc.Text(), ready) {
				readyLine = sc.Text()
				close(readyCh)
				closed = true
			}
		}
		if len(tail) > 0 {
			log.WriteString("…\n" + strings.Join(tail, "\n") + "\n")
		}
		exited <- cmd.Wait()
		pr.Close()
	}()
	stop := func() error {
		p := cmd.Process
		handedTo := int(f.handedTo.Load())
		if handedTo > 0 {
			p, _ = os.FindProcess(handedTo) // never fails on Linux
		}
		_ = p.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			exited <- err
		case <-time.After(15 * time.Second):
			_ = p.Kill()
			<-exited
		}
		// The pipe closes while the process handed to is still on its
		// way out (the kernel closes its files before it becomes a
		// zombie), and it is not our child to wait for: watch it go.
		if handedTo > 0 && !awaitGone(handedTo, 5*time.Second) {
			_ = p.Kill()
			awaitGone(handedTo, 5*time.Second)
		}
		if cleanup != nil {
			cleanup()
		}
		return nil
	}
	select {
	case <-readyCh:
		f.stop, f.ready = stop, readyLine
		return f, nil
	case err := <-exited:
		exited <- err
		if cleanup != nil {
			cleanup()
		}
		return nil, fmt.Errorf("%s exited before it was ready (%v):\n%s", cmd.Args[4], err, log.String())
	case <-time.After(timeout):
		stop()
		return nil, fmt.Errorf("%s not ready within %s:\n%s", cmd.Args[4], timeout, log.String())
	}
}

// startNft loads the kernel peer: DNAT of the VIP's port to the sinks by
// jhash of the client's address and port, as kube-proxy's nftables mode
// spreads a service over its endpoints.
func startNft(t *topo) (*forwarder, error) {
	var elems []string
	for i := range nSinks {
		elems = append(elems, fmt.Sprintf("%d : %s", i, sinkAddr(i)))
	}
	ruleset := fmt.Sprintf(`table ip xlbbench {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr %s tcp dport %d dnat to jhash ip saddr . tcp sport mod %d seed 0x1ab5eed map { %s }
	}
}
`, vipAddr, vipPort, nSinks, strings.Join(elems, ", "))
	cmd := exec.Command("ip", "netns", "exec", t.ns("app"), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("nft -f: %w: %s", err, out)
	}
	// conntrack is loaded now; give it room for every flow.
	_ = sysctl(t.ns("app"), "net.netfilter.nf_conntrack_max=1048576")
	return &forwarder{stop: func() error {
		return run("ip", "netns", "exec", t.ns("app"), "nft", "delete", "table", "ip", "xlbbench")
	}}, nil
}
