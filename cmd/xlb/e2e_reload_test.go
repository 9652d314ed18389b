package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// keepAlive is an HTTP/1.1 connection kept open through the VIP.
type keepAlive struct {
	src  netip.Addr
	conn net.Conn
	br   *bufio.Reader
	wait time.Duration // for an answer; 0: 5 s
}

func openKeepAlive(t *testing.T, l *lab.Lab, src netip.Addr) *keepAlive {
	t.Helper()
	var c net.Conn
	err := l.Client.Do(func() (err error) {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 3 * time.Second}
		c, err = d.Dial("tcp", netip.AddrPortFrom(l.Opts.VIP4, l.Opts.HTTPPort).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &keepAlive{src: src, conn: c, br: bufio.NewReader(c)}
}

func (k *keepAlive) ask() (lab.Reply, error) {
	var rep lab.Reply
	wait := k.wait
	if wait == 0 {
		wait = 5 * time.Second
	}
	k.conn.SetDeadline(time.Now().Add(wait))
	if _, err := fmt.Fprintf(k.conn, "GET / HTTP/1.1\r\nHost: vip\r\n\r\n"); err != nil {
		return rep, fmt.Errorf("%w (%s)", err, tcpState(k.conn))
	}
	resp, err := http.ReadResponse(k.br, nil)
	if err != nil {
		return rep, fmt.Errorf("%w (%s)", err, tcpState(k.conn))
	}
	defer resp.Body.Close()
	return rep, json.NewDecoder(resp.Body).Decode(&rep)
}

// tcpState is the kernel's view of a connection (TCP_INFO): whether it
// still waits for an acknowledgement, how often and how long ago it
// retransmitted, so a timeout tells a path that lost everything from a
// retransmission backoff that outlasted the wait.
func tcpState(c net.Conn) string {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return "not TCP"
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err.Error()
	}
	var info *unix.TCPInfo
	if cerr := rc.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Sprintf("TCP_INFO: %v", err)
	}
	return fmt.Sprintf("TCP state %d, unacked %d, retransmits %d in a row (backoff %d, rto %v), %d in all, data last sent %v ago and received %v ago",
		info.State, info.Unacked, info.Retransmits, info.Backoff, time.Duration(info.Rto)*time.Microsecond, info.Total_retrans,
		time.Duration(info.Last_data_sent)*time.Millisecond, time.Duration(info.Last_data_recv)*time.Millisecond)
}

// waitLog waits until the daemon logged a line containing s.
func waitLog(t *testing.T, x *labXLB, s string) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, "xlb logs "+s, func() (bool, string) {
		return strings.Contains(x.log.String(), s), ""
	})
}

// reloadWith writes rules as x's rule files, has the daemon reload them and
// waits until it logged that this reload was applied: it counts the lines,
// so an earlier reload's line does not end the wait.
func reloadWith(t *testing.T, l *lab.Lab, x *labXLB, rules []lab.Rule) {
	t.Helper()
	if _, err := l.WriteConfig(x.dir, rules); err != nil {
		t.Fatal(err)
	}
	before := strings.Count(x.log.String(), "msg=reloaded")
	if err := x.Reload(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "xlb logs msg=reloaded", func() (bool, string) {
		return strings.Count(x.log.String(), "msg=reloaded") > before, ""
	})
}

// A reload that adds a backend keeps every established connection on its
// backend; a reload with a broken file is rejected with file:line:key and
// traffic continues uninterrupted.
func TestEndToEndReload(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 4})
	rules := l.DefaultRules("IPIP")[:1]
	rules[0].Health = healthNone
	rules[0].Backends = []int{0, 1, 2}
	x := xlbIn(t, l, rules)

	var conns []*keepAlive
	where := map[*keepAlive]string{}
	for _, src := range l.ClientAddrs4[:60] {
		k := openKeepAlive(t, l, src)
		rep, err := k.ask()
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, k)
		where[k] = rep.Backend
	}

	// Traffic keeps flowing during both reloads.
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var bgRes []lab.DriveResult
	bg.Add(1)
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, _ := l.Drive(ctx, lab.DriveOptions{Requests: 100, Family: 4, Concurrency: 8})
			cancel()
			bgRes = append(bgRes, res)
		}
	}()

	rules[0].Backends = []int{0, 1, 2, 3}
	reloadWith(t, l, x, rules)
	for _, k := range conns {
		rep, err := k.ask()
		if err != nil {
			t.Fatalf("established connection from %s after adding a backend: %v", k.src, err)
		}
		if rep.Backend != where[k] {
			t.Errorf("connection from %s moved from %s to %s when a backend was added", k.src, where[k], rep.Backend)
		}
	}
	res := drive(t, l, 400, 4)
	if !res.OK() || res.PerBackend[3] == 0 {
		t.Errorf("after the reload new connections: %v (errors %d): the added backend gets none", res.PerBackend, res.Errors)
	}

	// A broken rule file: rejected whole, with file, line and key.
	web := filepath.Join(x.dir, "rules.d", "web4.toml")
	text, err := os.ReadFile(web)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(text), "[encap]", "[failover]\nratio = 1.5\n\n[encap]", 1)
	if err := os.WriteFile(web, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	line := 0
	for i, s := range strings.Split(broken, "\n") {
		if strings.HasPrefix(s, "ratio = 1.5") {
			line = i + 1
		}
	}
	if err := x.Reload(); err != nil {
		t.Fatal(err)
	}
	waitLog(t, x, fmt.Sprintf("rules.d/web4.toml:%d: failover.ratio: 1.5 is outside [0, 1]", line))
	waitLog(t, x, "reload rejected; the running configuration keeps serving")
	close(stop)
	bg.Wait()
	for i, r := range bgRes {
		if !r.OK() {
			t.Errorf("background round %d during the reloads: %d errors (first: %v)", i, r.Errors, r.FirstError)
		}
	}
	if len(bgRes) == 0 {
		t.Error("no background traffic ran")
	}
	for _, k := range conns {
		if rep, err := k.ask(); err != nil || rep.Backend != where[k] {
			t.Errorf("connection from %s after the rejected reload: %s, %v", k.src, rep.Backend, err)
		}
	}
}
