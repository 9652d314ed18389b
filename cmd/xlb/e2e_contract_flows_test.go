package main

// Persistence on unhealthy backends, entry lifetime and draining on removal
// on real packets.

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
)

// Persistence on unhealthy backends
// (docs/design.md#persistence-on-unhealthy-backends), one rule per cell: an
// open TCP connection survives its backend failing checks under
// DEFAULT_FOR_PROTOCOL, a UDP flow moves; NEVER_PERSIST moves TCP;
// ALWAYS_PERSIST keeps UDP. And with nothing healthy no flow moves
// (NEVER_PERSIST: "unless all backends are unhealthy"), until a healthy
// backend appears: then the flows of the backends still unhealthy move,
// those of the recovered backend stay.
func TestWirePersistenceOnUnhealthyBackends(t *testing.T) {
	wireTest(t)
	l := labWith(t, lab.Options{Backends: 3})
	const port5 = "session_affinity = \"CLIENT_IP_PORT_PROTO\"\n" // UDP tracked by 5-tuple
	x := xlbIn(t, l, []lab.Rule{
		rule(l, "web4", ""), // DEFAULT_FOR_PROTOCOL
		rule(l, "udp4", port5),
		rule(l, "web6", "[connection_tracking]\npersistence_on_unhealthy = \"NEVER_PERSIST\"\n"),
		rule(l, "udp6", port5+"[connection_tracking]\npersistence_on_unhealthy = \"ALWAYS_PERSIST\"\n"),
	})
	rules := []string{"web4", "udp4", "web6", "udp6"}
	waitAll := func(want string, idx ...int) {
		t.Helper()
		for _, r := range rules {
			waitHealth(t, l, x, r, want, idx...)
		}
	}
	waitAll("HEALTHY", 0, 1, 2)
	tcp4, tcp6 := connOn(t, l, 4, 0, 0), connOn(t, l, 6, 0, 0)
	udp4, udp6 := udpFlowOn(t, l, 4, 0, 0), udpFlowOn(t, l, 6, 0, 0)

	l.Backends[0].SetHealthy(false)
	waitAll("UNHEALTHY", 0)
	if b := tcp4.on(); b != 0 {
		t.Errorf("DEFAULT_FOR_PROTOCOL: TCP connection went to %d after be0 failed; want it kept on be0", b)
	}
	if b := udp4.who(16); b == 0 || b < 0 {
		t.Errorf("DEFAULT_FOR_PROTOCOL: UDP flow answered by %d after be0 failed; want another backend", b)
	}
	if b := tcp6.on(); b == 0 {
		t.Errorf("NEVER_PERSIST: TCP connection still on be0 after it failed")
	}
	if b := udp6.who(16); b != 0 {
		t.Errorf("ALWAYS_PERSIST: UDP flow answered by %d after be0 failed; want be0", b)
	}

	// Nothing healthy.
	l.Backends[0].SetHealthy(true)
	waitAll("HEALTHY", 0)
	never1, never2 := connOn(t, l, 6, 1, 0), connOn(t, l, 6, 2, 0)
	udp1 := udpFlowOn(t, l, 4, 1, 0)
	for _, b := range l.Backends {
		b.SetHealthy(false)
	}
	waitAll("UNHEALTHY", 0, 1, 2)
	if a, b := never1.on(), never2.on(); a != 1 || b != 2 {
		t.Errorf("NEVER_PERSIST with nothing healthy: connections on be1, be2 went to %d, %d; want them kept", a, b)
	}
	if b := udp1.who(16); b != 1 {
		t.Errorf("DEFAULT_FOR_PROTOCOL UDP with nothing healthy: flow on be1 answered by %d; want it kept", b)
	}
	l.Backends[1].SetHealthy(true)
	waitAll("HEALTHY", 1)
	if a := never1.on(); a != 1 {
		t.Errorf("NEVER_PERSIST: be1 recovered first, its connection went to %d", a)
	}
	if b := never2.on(); b == 2 {
		t.Errorf("NEVER_PERSIST: connection on still unhealthy be2 kept after be1 recovered")
	}
	if b := udp1.who(16); b != 1 {
		t.Errorf("UDP flow on recovered be1 answered by %d", b)
	}
}

// Entry lifetime (docs/design.md#entry-lifetime): after the eligible set
// changes, a flow idle for longer than idle_timeout is placed anew, one that
// keeps sending stays; a flow whose client sent FIN keeps its entry while the
// backend's data still flows (the client's ACKs reach the same backend) until
// it ends.
func TestWireEntryLifetime(t *testing.T) {
	wireTest(t)
	l := labWith(t, lab.Options{Backends: 4})
	const streamPort = 9000
	listenOnVIP(t, l, l.Opts.VIP4, streamPort, streamAfterFIN)
	l.Backends[3].SetHealthy(false)
	// idle_timeout 5 s: short for the test, long beside the gaps a loaded
	// machine puts between the packets of a flow that keeps sending.
	r := rule(l, "web4", "[connection_tracking]\nidle_timeout = \"5s\"\n")
	r.Ports = fmt.Sprintf(`["%d", "%d"]`, l.Opts.HTTPPort, streamPort)
	x := xlbIn(t, l, []lab.Rule{r})
	waitHealth(t, l, x, "web4", "HEALTHY", 0, 1, 2)
	waitHealth(t, l, x, "web4", "UNHEALTHY", 3)

	var idle, busy []*keepConn
	all, where := openKeeps(t, l, l.ClientAddrs4[:60])
	for i, k := range all {
		if i%3 == 0 {
			busy = append(busy, k)
		} else {
			idle = append(idle, k)
		}
	}
	stop := make(chan struct{})
	var pinger sync.WaitGroup
	pinger.Add(1)
	moved := 0
	go func() { // the busy flows send every 300 ms, well inside the idle timeout
		defer pinger.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			for _, k := range busy {
				if k.on() != where[k] {
					moved++
				}
			}
		}
	}()
	// Streams whose clients send FIN at once.
	streams := make(chan error, 20)
	for _, src := range l.ClientAddrs4[100:120] {
		go func() { streams <- readStream(l, src, netip.AddrPortFrom(l.Opts.VIP4, streamPort)) }()
	}
	time.Sleep(500 * time.Millisecond) // the streams are open and half-closed
	l.Backends[3].SetHealthy(true)
	waitHealth(t, l, x, "web4", "HEALTHY", 3)
	for range 20 {
		if err := <-streams; err != nil {
			t.Errorf("a stream whose client sent FIN broke when the eligible set changed: %v", err)
		}
	}
	time.Sleep(6 * time.Second) // > idle_timeout for the idle flows
	close(stop)
	pinger.Wait()
	if moved > 0 {
		t.Errorf("%d answers of flows that kept sending came from another backend", moved)
	}
	replaced := 0
	for _, k := range idle {
		switch b := k.on(); b {
		case where[k]:
		case -1, 3:
			replaced++ // placed anew on be3, which has no such connection
		default:
			t.Errorf("idle flow on be%d answered by be%d", where[k], b)
		}
	}
	if replaced == 0 {
		t.Errorf("none of %d flows idle for longer than idle_timeout was placed anew on be3", len(idle))
	}
	t.Logf("%d of %d idle flows placed anew after the eligible set changed", replaced, len(idle))
}

const streamChunks = 80

// streamAfterFIN serves one connection: it reads until the client's FIN,
// then writes 80 chunks of 1 KiB 100 ms apart (long enough to span the
// change of the eligible set) and closes.
func streamAfterFIN(_ int, c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		return
	}
	chunk := make([]byte, 1024)
	for range streamChunks {
		if _, err := c.Write(chunk); err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readStream connects from src, sends a line and FIN, and reads the
// stream to its end.
func readStream(l *lab.Lab, src netip.Addr, dst netip.AddrPort) error {
	var c net.Conn
	if err := l.Client.Do(func() (err error) {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 3 * time.Second}
		c, err = d.Dial("tcp", dst.String())
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte("stream please\n")); err != nil {
		return err
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, c)
	if err != nil {
		return fmt.Errorf("from %s after %d bytes: %w", src, n, err)
	}
	if n != streamChunks*1024 {
		return fmt.Errorf("from %s: %d bytes, want %d", src, n, streamChunks*1024)
	}
	return nil
}

// Draining on removal (docs/design.md#draining-on-removal): a reload removes
// a backend with connection_draining_timeout 5 s; new connections never reach
// it, an open one keeps it until the timeout and not after.
func TestWireDrainingOnRemoval(t *testing.T) {
	wireTest(t)
	l := labWith(t, lab.Options{Backends: 3})
	rules := []lab.Rule{rule(l, "web4", "connection_draining_timeout = \"5s\"\n")}
	x := xlbIn(t, l, rules)
	waitHealth(t, l, x, "web4", "HEALTHY", 0, 1, 2)
	k := connOn(t, l, 4, 1, 0)

	rules[0].Backends = []int{0, 2}
	reloaded := time.Now()
	reloadWith(t, l, x, rules)
	until := backendOf(x.status(t), "web4", l.Backends[1].Tunnel4.String()).DrainUntil
	if until == nil || until.Sub(reloaded) > 15*time.Second || until.Sub(reloaded) < 5*time.Second {
		t.Fatalf("removed be1 drains until %v, reload at %v: want about 5 s later", until, reloaded)
	}
	for time.Until(*until) > time.Second {
		asked := time.Now()
		if rep, err := k.get(); (err != nil || rep.Index != 1) && asked.Before(until.Add(-500*time.Millisecond)) {
			t.Fatalf("open connection went to %d (%v) %v before the draining timeout; want be1; drops %v", rep.Index, err, until.Sub(asked), x.status(t).Counters.Drops)
		}
		if res := driveFor(t, l, 30, 4, 3*time.Second); !noneOn(res, 1) {
			t.Errorf("new connections during the drain: %s; want none on be1", describe(res))
		}
	}
	time.Sleep(time.Until(until.Add(1500 * time.Millisecond)))
	if b := k.on(); b == 1 {
		t.Error("open connection still on the removed be1 after connection_draining_timeout")
	}
	if res := driveFor(t, l, 30, 4, 3*time.Second); !noneOn(res, 1) {
		t.Errorf("new connections after the drain: %s", describe(res))
	}
}
