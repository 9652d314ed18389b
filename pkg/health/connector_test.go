package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/failover"
)

// fullListener returns a loopback address whose listener never accepts and
// whose accept queue is full, so further SYNs are dropped and a connect
// hangs until its timeout.
func fullListener(tb testing.TB) netip.AddrPort {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		tb.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatal(err)
	}
	addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*syscall.SockaddrInet4).Port))
	// Fill the queue (backlog 0 holds one connection; two to be sure).
	for range 2 {
		c, err := net.DialTimeout("tcp", addr.String(), 200*time.Millisecond)
		if err != nil {
			break
		}
		tb.Cleanup(func() { c.Close() })
	}
	return addr
}

// TestConnector: connect-only TCP probes of a Checker with the default
// dialer take the connector, and pass, fail at once or time out as a
// connection does; Remove cuts a connect in flight short.
func TestConnector(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln6, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer ln6.Close()
	rec := newRecorder()
	c := New(Options{Seed: 3, OnChange: rec.on})
	defer c.Stop()
	check := func(rule string, addr netip.AddrPort, timeout time.Duration) Target {
		return Target{Key: Key{Rule: rule, Backend: addr.Addr()}, Check: Check{
			Kind: TCP, Port: addr.Port(), Interval: 20 * time.Millisecond, Timeout: timeout, HealthyThreshold: 1, UnhealthyThreshold: 1,
		}}
	}
	fullAddr := fullListener(t)
	open := check("open", netip.MustParseAddrPort(ln.Addr().String()), time.Second)
	open6 := check("open", netip.MustParseAddrPort(ln6.Addr().String()), time.Second)
	closed := check("closed", netip.MustParseAddrPort(closedPort(t)), time.Second)
	full := check("full", fullAddr, 100*time.Millisecond)
	for _, tg := range []Target{open, open6, closed, full} {
		if err := c.Add(tg); err != nil {
			t.Fatal(err)
		}
	}
	if s := rec.waitFor(t, open.Key, healthIs(failover.HealthHealthy)); state(s) != "H1" || s.LastLatency <= 0 {
		t.Errorf("listening: %v (latency %s), want HEALTHY weight 1", s, s.LastLatency)
	}
	if s := rec.waitFor(t, open6.Key, healthIs(failover.HealthHealthy)); state(s) != "H1" {
		t.Errorf("listening on ::1: %v", s)
	}
	s := rec.waitFor(t, closed.Key, healthIs(failover.HealthUnhealthy))
	if !strings.Contains(s.LastError.Error(), "connection refused") || errors.Is(s.LastError, ErrTimeout) || !strings.Contains(s.LastError.Error(), "TCP probe 127.0.0.1:") {
		t.Errorf("closed port: %v, want refused, not a timeout, naming the probe", s.LastError)
	}
	s = rec.waitFor(t, full.Key, healthIs(failover.HealthUnhealthy))
	if !errors.Is(s.LastError, ErrTimeout) || s.LastLatency < 100*time.Millisecond {
		t.Errorf("SYNs dropped: %v after %s, want a timeout after 100ms", s.LastError, s.LastLatency)
	}

	// A connect in flight ends when its target is removed, long before its
	// timeout, and reports nothing more.
	slow := check("slow", fullAddr, time.Minute)
	if err := c.Add(slow); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, busy := c.queued(); busy > 0 && c.inflight(slow.Key) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow target's connect never started")
		}
	}
	start := time.Now()
	if !c.Remove(slow.Key) {
		t.Fatal("Remove: not probed")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Remove took %s with a connect in flight", took)
	}
	for _, e := range rec.all() {
		if e.Key == slow.Key {
			t.Errorf("a removed target reported %v", e)
		}
	}
	c.Stop()
	noProbers(t)
}

// inflight reports whether k's connect is in the connector.
func (c *Checker) inflight(k Key) bool {
	c.mu.Lock()
	t := c.targets[k]
	conns := c.conns
	c.mu.Unlock()
	if t == nil || conns == nil {
		return false
	}
	conns.mu.Lock()
	defer conns.mu.Unlock()
	return conns.byTarget[t] != nil
}

// TestConnectorLeavesNoSocket: a connect-only probe ends SYN, SYN-ACK,
// RST, so the backend's application accepts nothing and neither end keeps
// a socket (no TIME_WAIT on the prober, no half-closed connection on the
// backend). A probe that closed with FIN, or completed the handshake,
// leaves both.
func TestConnectorLeavesNoSocket(t *testing.T) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := netip.MustParseAddrPort(ln.Addr().String())
	c := New(Options{Seed: 4})
	defer c.Stop()
	tg := Target{Key: Key{Rule: "linger", Backend: addr.Addr()}, Check: Check{
		Kind: TCP, Port: addr.Port(), Interval: 20 * time.Millisecond, Timeout: time.Second, HealthyThreshold: 1, UnhealthyThreshold: 1,
	}}
	if err := c.Add(tg); err != nil {
		t.Fatal(err)
	}
	const probes = 10
	for deadline := time.Now().Add(10 * time.Second); c.Probes() < probes+1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d probes in 10 s", c.Probes())
		}
	}
	c.Stop()
	if st := c.Status(); len(st) != 1 || st[0].Health != failover.HealthHealthy {
		t.Fatalf("status %v, want the listener healthy", st)
	}

	// The reset is handled as it is sent (loopback); a second is headroom.
	var left []string
	for deadline := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		if left = tcpSockets(t, addr.Port()); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("%d probes left %d sockets to or from port %d: %v", probes, len(left), addr.Port(), left)
	}
	accepted := 0
	ln.SetDeadline(time.Now().Add(50 * time.Millisecond))
	for {
		conn, err := ln.Accept()
		if err != nil {
			break
		}
		conn.Close()
		accepted++
	}
	// A round later than the delayed ACK's 200 ms lets the handshake
	// complete before the reset; half the probes is far beyond that.
	if accepted > probes/2 {
		t.Errorf("the backend accepted %d of %d probes' connections, want none", accepted, probes)
	}
}

// tcpSockets lists the IPv4 TCP sockets other than listeners whose local
// or remote port is port, as "state local remote" from /proc/net/tcp.
func tcpSockets(tb testing.TB, port uint16) []string {
	tb.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		tb.Fatal(err)
	}
	want := fmt.Sprintf(":%04X", port)
	var found []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] == "0A" { // 0A: LISTEN
			continue
		}
		if strings.HasSuffix(f[1], want) || strings.HasSuffix(f[2], want) {
			found = append(found, f[3]+" "+f[1]+" "+f[2])
		}
	}
	return found
}

// TestConnectorDiscardsRemovedBeforeLook: a connect started in a round
// whose target is removed before the round looks at it (Remove finds it
// in no table of the connector yet) ends at that look, discarded and its
// socket closed, instead of joining epoll to wait for its timeout while
// Remove waits for it.
func TestConnectorDiscardsRemovedBeforeLook(t *testing.T) {
	addr := fullListener(t) // a connect to it stays in SYN-SENT
	c := New(Options{Seed: 5})
	defer c.Stop()
	k := newConnector(c)
	defer unix.Close(k.epfd)
	probe := func(rule string) *target {
		tg := Target{Key: Key{Rule: rule, Backend: addr.Addr()}, Check: Check{Kind: TCP, Port: addr.Port(), Timeout: time.Minute}}
		x := &target{Target: tg, p: newProber(tg, DirectDial, nil)}
		x.ctx, x.cancel = context.WithCancel(context.Background())
		k.start(x, time.Now())
		return x
	}
	kept, removed := probe("kept"), probe("removed")
	defer kept.cancel()
	if len(k.fresh) != 2 {
		t.Fatalf("%d connects started, want 2 still connecting", len(k.fresh))
	}
	fd := k.fresh[1].fd
	removed.cancel() // what Remove does to a target with a probe in flight
	k.mu.Lock()
	done := k.look(nil)
	keptConn, keptWatched := k.byTarget[kept]
	_, removedWatched := k.byTarget[removed]
	k.mu.Unlock()
	if keptWatched {
		defer rawClose(keptConn.fd)
	}
	if len(done) != 1 || done[0].t != removed || done[0].r != (Result{}) {
		t.Errorf("the look ended %v, want the removed target's connect alone, discarded", done)
	}
	if removedWatched || !keptWatched {
		t.Errorf("watched: removed %v, kept %v; want the kept target's connect alone", removedWatched, keptWatched)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("the removed target's socket %d is still open (%v)", fd, err)
	}
}

// TestMaxInFlight: many connect-only probes due at once against a backend
// that drops SYNs never hold more than MaxInFlight sockets; the probes
// over the bound start in later rounds, late but not lost, each ends as
// the timeout it is (the wait is not counted in it), and OnLate says so
// once. Without the bound every due probe opens its socket in one round.
func TestMaxInFlight(t *testing.T) {
	addr := fullListener(t) // every connect hangs until its timeout
	const targets, bound, timeout = 24, 4, 300 * time.Millisecond
	// The last of targets/bound batches starts after the others timed out.
	const lastWait = (targets/bound - 1) * timeout
	var mu sync.Mutex
	var reports [][2]uint64
	onLate := func(late uint64, maxInFlight int) {
		mu.Lock()
		reports = append(reports, [2]uint64{late, uint64(maxInFlight)})
		mu.Unlock()
	}
	base := openFDs(t)
	c := New(Options{Seed: 6, MaxInFlight: bound, OnLate: onLate})
	defer c.Stop()
	for i := range targets {
		tg := Target{Key: Key{Rule: fmt.Sprintf("r%02d", i), Backend: addr.Addr()}, Check: Check{
			Kind: TCP, Port: addr.Port(), Interval: 10 * time.Millisecond, Timeout: timeout, HealthyThreshold: 1, UnhealthyThreshold: 1,
		}}
		if err := c.Add(tg); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	peak, probed := 0, 0
	for deadline := start.Add(20 * time.Second); probed < targets; time.Sleep(2 * time.Millisecond) {
		peak = max(peak, openFDs(t)-base)
		probed = 0
		for _, s := range c.Status() {
			if !s.LastProbe.IsZero() {
				probed++
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d targets probed after 20 s", probed, targets)
		}
	}
	took := time.Since(start)
	c.Stop()
	// The connector's epoll instance is the one descriptor beside them.
	if peak > bound+1 {
		t.Errorf("%d descriptors open at once, want at most %d sockets and the epoll instance", peak, bound)
	}
	if took < lastWait {
		t.Errorf("every target probed after %s: the bound of %d held nothing back", took, bound)
	}
	for _, s := range c.Status() {
		if s.Health != failover.HealthUnhealthy || !errors.Is(s.LastError, ErrTimeout) || !strings.Contains(s.LastError.Error(), "after 300ms") {
			t.Errorf("%v, want UNHEALTHY on a timeout after 300ms", s)
		}
		if s.LastLatency < timeout || s.LastLatency >= lastWait {
			t.Errorf("%s: latency %s, want the timeout's %s from the probe's start, not from when it was due", s.Key, s.LastLatency, timeout)
		}
	}
	if late := c.Late(); late < targets-bound {
		t.Errorf("%d probes counted late, want at least the %d held back in the first round", late, targets-bound)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 1 || reports[0][0] == 0 || reports[0][1] != bound {
		t.Errorf("OnLate calls %v, want one (the next a minute later at the earliest) with late > 0 and the bound %d", reports, bound)
	}
}

// openFDs counts the process's open descriptors.
func openFDs(tb testing.TB) int {
	tb.Helper()
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		tb.Fatal(err)
	}
	return len(names)
}
