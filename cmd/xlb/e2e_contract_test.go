package main

// Helpers of the behaviour-contract lab tests: the tests named
// TestWire<row> check docs/design.md#behaviour-contract row by row on real
// packets, each citing its rows in its doc comment, as
// pkg/dataplane's conformance tests do with Decide. Each builds its own lab
// (or several), so they run in parallel with each other: most of their time
// is spent waiting for health checks and timers.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// wireTest marks a contract lab test: root only, parallel with the others.
func wireTest(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
	t.Parallel()
}

// wireCase is one independent part of a contract test, with a lab of its own.
type wireCase struct {
	name string
	run  func(t *testing.T)
}

// concurrently runs the cases as subtests at the same time (t.Run from
// several goroutines, which the -parallel limit does not count): each waits
// on timers far more than it computes.
func concurrently(t *testing.T, cases ...wireCase) {
	t.Helper()
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(c.name, c.run)
		}()
	}
	wg.Wait()
}

// wireLab builds a lab and starts xlb on it with rules.
func wireLab(t *testing.T, o lab.Options, rules []lab.Rule) (*lab.Lab, *labXLB) {
	t.Helper()
	l := labWith(t, o)
	return l, xlbIn(t, l, rules)
}

// rule is one of the lab's default rules (web4, web6: TCP on the HTTP
// port; udp4, udp6: UDP on all ports), IPIP, with extra as its only extra
// TOML (the UDP defaults' affinity is replaced too) and, when given, groups.
func rule(l *lab.Lab, name, extra string, groups ...lab.Group) lab.Rule {
	for _, r := range l.DefaultRules("IPIP") {
		if r.Name == name {
			r.Extra, r.Groups = extra, groups
			return r
		}
	}
	panic("no default rule " + name)
}

func group(name string, extra string, backends ...int) lab.Group {
	return lab.Group{Name: name, Backends: backends, Extra: extra}
}

// vipOf is the lab's VIP of family 4 or 6.
func vipOf(l *lab.Lab, family int) netip.Addr {
	if family == 6 {
		return l.Opts.VIP6
	}
	return l.Opts.VIP4
}

func clientsOf(l *lab.Lab, family int) []netip.Addr {
	if family == 6 {
		return l.ClientAddrs6
	}
	return l.ClientAddrs4
}

// dialVIP opens a keep-alive HTTP connection from src to vip's HTTP port.
func dialVIP(l *lab.Lab, src, vip netip.Addr) (*keepConn, error) {
	var c net.Conn
	err := l.Client.Do(func() error {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 3 * time.Second}
		var err error
		c, err = d.Dial("tcp", netip.AddrPortFrom(vip, l.Opts.HTTPPort).String())
		return err
	})
	if err != nil {
		return nil, err
	}
	return &keepConn{c: c, br: bufio.NewReader(c)}, nil
}

// openKeeps opens one keep-alive IPv4 connection from each of srcs and
// records the backend each landed on.
func openKeeps(t *testing.T, l *lab.Lab, srcs []netip.Addr) ([]*keepConn, map[*keepConn]int) {
	t.Helper()
	var ks []*keepConn
	where := map[*keepConn]int{}
	for _, src := range srcs {
		k, err := dialVIP(l, src, l.Opts.VIP4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.c.Close() })
		if where[k] = k.on(); where[k] < 0 {
			t.Fatalf("connection from %s: no answer", src)
		}
		ks = append(ks, k)
	}
	return ks, where
}

// listenOnVIP listens on vip:port in every backend namespace and serves
// each connection with serve (given the backend's index) on its own
// goroutine, until the test ends.
func listenOnVIP(t *testing.T, l *lab.Lab, vip netip.Addr, port uint16, serve func(backend int, c net.Conn)) {
	t.Helper()
	for _, b := range l.Backends {
		serveIn(t, b.NS, netip.AddrPortFrom(vip, port), func(c net.Conn) { serve(b.Index, c) })
	}
}

// serveIn listens on TCP addr inside ns and serves each connection with
// serve on its own goroutine, until the test ends.
func serveIn(t *testing.T, ns *netns.NS, addr netip.AddrPort, serve func(c net.Conn)) {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		ln, err = net.Listen("tcp", addr.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
}

// connOn opens keep-alive connections of family from successive client
// addresses, starting at from, until one lands on backend idx, and closes
// the others.
func connOn(t *testing.T, l *lab.Lab, family, idx, from int) *keepConn {
	t.Helper()
	srcs := clientsOf(l, family)
	var errs []error
	for i := range len(srcs) {
		src := srcs[(from+i)%len(srcs)]
		k, err := dialVIP(l, src, vipOf(l, family))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rep, err := k.get()
		if err == nil && rep.Index == idx {
			t.Cleanup(func() { k.c.Close() })
			return k
		}
		if err != nil {
			errs = append(errs, err)
		}
		k.c.Close()
	}
	t.Fatalf("no IPv%d connection landed on be%d (%d errors: %v)", family, idx, len(errs), errors.Join(errs[:min(len(errs), 3)]...))
	return nil
}

// on reports where the connection's next request goes: the backend index,
// or -1 when the connection is broken (reset by a backend that does not
// know it, or timed out).
func (k *keepConn) on() int {
	rep, err := k.get()
	if err != nil {
		return -1
	}
	return rep.Index
}

// driveFor drives n requests of family with a short per-request timeout
// (new connections that are dropped count as errors quickly).
func driveFor(t *testing.T, l *lab.Lab, n, family int, timeout time.Duration) lab.DriveResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := l.Drive(ctx, lab.DriveOptions{Requests: n, Family: family, Timeout: timeout, Concurrency: 16})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// onlyOn reports whether every request was answered, by backends in idx
// only, each of them answering at least one.
func onlyOn(res lab.DriveResult, idx ...int) bool {
	if !res.OK() {
		return false
	}
	for i, n := range res.PerBackend {
		if slices.Contains(idx, i) != (n > 0) {
			return false
		}
	}
	return true
}

// noneOn reports whether every request was answered and none by idx.
func noneOn(res lab.DriveResult, idx ...int) bool {
	if !res.OK() {
		return false
	}
	for _, i := range idx {
		if res.PerBackend[i] > 0 {
			return false
		}
	}
	return true
}

func describe(res lab.DriveResult) string {
	return fmt.Sprintf("%v, %d errors (%v)", res.PerBackend, res.Errors, res.FirstError)
}

// status is the daemon's status over its control socket.
func (x *labXLB) status(t *testing.T) control.Status { t.Helper(); return statusJSON(t, x.Socket()) }

// ruleStatus returns rule name of st.
func ruleStatus(t *testing.T, st control.Status, name string) control.Rule {
	t.Helper()
	for _, r := range st.Rules {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("status has no rule %s", name)
	return control.Rule{}
}

// health returns the health of each lab backend in rule of st, by index
// ("" for backends the rule does not have).
func health(l *lab.Lab, st control.Status, rule string) []string {
	out := make([]string, len(l.Backends))
	for i, b := range l.Backends {
		for _, a := range []netip.Addr{b.Tunnel4, b.Tunnel6} {
			if h := backendOf(st, rule, a.String()).Health; h != "" {
				out[i] = h
			}
		}
	}
	return out
}

// waitHealth waits until the published state of rule (its first round of
// health checks done: before it, status shows verdicts the eligible set
// does not use yet) has want for the given backends.
func waitHealth(t *testing.T, l *lab.Lab, x *labXLB, rule, want string, idx ...int) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("%s: be%v %s", rule, idx, want), func() (bool, string) {
		st := x.status(t)
		if !ruleStatus(t, st, rule).FirstChecksDone {
			return false, "first health checks not published yet"
		}
		h := health(l, st, rule)
		for _, i := range idx {
			if !strings.HasPrefix(h[i], want) {
				return false, fmt.Sprint(h)
			}
		}
		return true, fmt.Sprint(h)
	})
}

// udpFlow is one UDP flow: a socket bound to one source port, so every
// datagram has the same 5-tuple.
type udpFlow struct {
	c   *net.UDPConn
	dst netip.AddrPort
}

func openUDPFlow(t *testing.T, l *lab.Lab, src netip.Addr, dst netip.AddrPort) *udpFlow {
	t.Helper()
	c, err := l.ListenUDP(netip.AddrPortFrom(src, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &udpFlow{c: c, dst: dst}
}

// who sends a WHO? datagram of size bytes and returns the backend that
// answered, or -1 when none did within a second (three tries).
func (f *udpFlow) who(size int) int {
	rep, ok := f.whoReply(size)
	if !ok {
		return -1
	}
	return rep.Index
}

// whoReply is who with the backend's whole answer (Size: the bytes it
// received).
func (f *udpFlow) whoReply(size int) (lab.Reply, bool) {
	payload := make([]byte, max(size, len(lab.WhoPrefix)))
	copy(payload, lab.WhoPrefix)
	buf := make([]byte, 65536)
	for range 3 {
		f.c.SetDeadline(time.Now().Add(time.Second))
		if _, err := f.c.WriteToUDPAddrPort(payload, f.dst); err != nil {
			continue
		}
		for {
			n, from, err := f.c.ReadFromUDPAddrPort(buf)
			if err != nil {
				break
			}
			var rep lab.Reply
			if from.Port() != f.dst.Port() || json.Unmarshal(buf[:n], &rep) != nil {
				continue
			}
			return rep, true
		}
	}
	return lab.Reply{}, false
}

// udpFlowOn opens flows from successive client addresses until one lands
// on backend idx.
func udpFlowOn(t *testing.T, l *lab.Lab, family, idx, from int) *udpFlow {
	t.Helper()
	srcs := clientsOf(l, family)
	dst := netip.AddrPortFrom(vipOf(l, family), l.Opts.UDPPort)
	for i := range len(srcs) {
		f := openUDPFlow(t, l, srcs[(from+i)%len(srcs)], dst)
		if f.who(16) == idx {
			return f
		}
		f.c.Close()
	}
	t.Fatalf("no IPv%d UDP flow landed on be%d", family, idx)
	return nil
}
