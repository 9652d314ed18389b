package main

// End-to-end tests of the packet path on the wire: fragments, MTU and
// ICMP, traffic that is not for a VIP, and long-lived connections.

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// UDP echo through a UDP all-ports rule with CLIENT_IP + PER_SESSION:
// datagrams of 3000 bytes, fragmented by the client, arrive whole at one
// backend per client.
func TestEndToEndUDPFragments(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 3})
	rules := l.DefaultRules("IPIP")[2:3] // udp4
	// Health is not under test: without checks every backend is eligible
	// from the start, so sessions cannot stick to the first one to pass.
	rules[0].Health = healthNone
	xlbIn(t, l, rules)
	dst := netip.AddrPortFrom(l.Opts.VIP4, l.Opts.UDPPort)
	seen := map[int]int{}
	// Sessions stick (that is the point of PER_SESSION), so wait with
	// other clients until every backend passed its health check.
	testutil.WaitFor(t, 20*time.Second, "all backends healthy", func() (bool, string) {
		hit := map[int]bool{}
		for _, src := range l.ClientAddrs4[100:140] {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			rep, err := l.UDPWho(ctx, src, dst, 100)
			cancel()
			if err != nil {
				return false, err.Error()
			}
			hit[rep.Index] = true
		}
		return len(hit) == 3, fmt.Sprint(hit)
	})
	for _, src := range l.ClientAddrs4[:60] {
		first := -1
		for range 3 {
			// The sending port changes every time: only CLIENT_IP keeps
			// the datagrams of one client together.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			rep, err := l.UDPWho(ctx, src, dst, 3000)
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			if rep.Size != 3000 {
				t.Fatalf("%s: backend %s received %d of 3000 bytes", src, rep.Backend, rep.Size)
			}
			if rep.Remote.Addr() != src || rep.Local.Addr() != l.Opts.VIP4 {
				t.Fatalf("%s: backend saw %v → %v", src, rep.Remote, rep.Local)
			}
			if first >= 0 && rep.Index != first {
				t.Fatalf("%s: datagrams went to backends %d and %d", src, first, rep.Index)
			}
			first = rep.Index
		}
		seen[first]++
	}
	if len(seen) < 3 {
		t.Errorf("60 clients used only backends %v", seen)
	}
}

// routeMTU returns the path MTU the namespace's kernel cached for dst, or 0.
func routeMTU(t *testing.T, ns interface {
	Output(string, ...string) (string, error)
}, args ...string) int {
	out, err := ns.Output("ip", append([]string{"route", "get"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(out)
	for i := range f[:len(f)-1] {
		if f[i] == "mtu" {
			var m int
			fmt.Sscan(f[i+1], &m)
			return m
		}
	}
	return 0
}

// With the appliance-to-backend MTU at 1500, a 1500-byte DF packet gets an
// ICMP fragmentation-needed quoting 1480 (IPIP) back at the client, and a
// 1500-byte packet without DF reaches the backend whole (the outer packet
// is fragmented).
func TestEndToEndMTU(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 2, FabricMTU: 1500})
	xlbIn(t, l, l.DefaultRules("IPIP"))
	src := l.ClientAddrs4[5]
	testutil.WaitFor(t, 20*time.Second, "backends healthy", func() (bool, string) {
		res := drive(t, l, 20, 4)
		return res.OK(), fmt.Sprint(res.Errors, res.FirstError)
	})

	// DF: a POST with a body bigger than one segment sends 1500-byte
	// segments with DF (Linux does path-MTU discovery on TCP); xlb answers
	// the first one with frag-needed 1480, the client's kernel caches it and
	// resends smaller segments, and the request completes.
	body := strings.Repeat("x", 20000)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", l.VIPURL(l.Opts.VIP4), strings.NewReader(body))
	resp, err := l.HTTPClient(src).Do(req)
	if err != nil {
		t.Fatalf("POST through a 1500-byte path: %v", err)
	}
	var rep lab.Reply
	json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if rep.Size != len(body) {
		t.Errorf("backend received %d of %d bytes", rep.Size, len(body))
	}
	if mtu := routeMTU(t, l.Client, l.Opts.VIP4.String(), "from", src.String()); mtu != 1480 {
		t.Errorf("client's cached path MTU to the VIP is %d, want 1480 (from xlb's frag-needed)", mtu)
	}

	// No DF: a 1500-byte UDP datagram reaches the backend whole.
	c, err := l.ListenUDP(netip.AddrPortFrom(l.ClientAddrs4[6], 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, _ := c.SyscallConn()
	raw.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_MTU_DISCOVER, syscall.IP_PMTUDISC_DONT)
	})
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 1500-20-8)
	copy(payload, lab.WhoPrefix)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.WriteToUDPAddrPort(payload, netip.AddrPortFrom(l.Opts.VIP4, l.Opts.UDPPort)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no reply to a 1500-byte datagram without DF: %v", err)
	}
	if err := json.Unmarshal(buf[:n], &rep); err != nil || rep.Size != len(payload) {
		t.Errorf("backend received %d of %d bytes (%v)", rep.Size, len(payload), err)
	}
}

// icmpFragNeeded builds an ICMP fragmentation-needed (MTU mtu) quoting a
// UDP packet from quotedSrc:sport to quotedDst:dport.
func icmpFragNeeded(quotedSrc, quotedDst netip.Addr, sport, dport uint16, mtu uint16) []byte {
	b := make([]byte, 8+20+8)
	b[0], b[1] = 3, 4
	binary.BigEndian.PutUint16(b[6:], mtu)
	ip := b[8:28]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 1400)
	ip[8], ip[9] = 64, packet.ProtoUDP
	s4, d4 := quotedSrc.As4(), quotedDst.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:], ^packet.Checksum(ip, 0))
	binary.BigEndian.PutUint16(b[28:], sport)
	binary.BigEndian.PutUint16(b[30:], dport)
	binary.BigEndian.PutUint16(b[32:], 1380)
	binary.BigEndian.PutUint16(b[2:], ^packet.Checksum(b, 0))
	return b
}

// An ICMP fragmentation-needed quoting a live flow (a backend's reply
// VIP → client) reaches that flow's backend, whose kernel then caches the
// smaller path MTU towards the client; the other backends never see it.
func TestEndToEndICMPErrorReachesFlowBackend(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 3})
	xlbIn(t, l, l.DefaultRules("GRE"))
	client := l.ClientAddrs4[9]
	dst := netip.AddrPortFrom(l.Opts.VIP4, l.Opts.UDPPort)
	var rep lab.Reply
	testutil.WaitFor(t, 20*time.Second, "UDP flow placed", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		rep, err = l.UDPWho(ctx, client, dst, 100)
		return err == nil, fmt.Sprint(err)
	})
	// The client's kernel sends the error, as a router on the return path
	// would: to the VIP, quoting VIP:7 → client:port.
	msg := icmpFragNeeded(l.Opts.VIP4, client, l.Opts.UDPPort, rep.Remote.Port(), 1400)
	err := l.Client.Do(func() error {
		c, err := net.ListenPacket("ip4:icmp", client.String())
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WriteTo(msg, &net.IPAddr{IP: l.Opts.VIP4.AsSlice()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "backend caches MTU 1400 towards the client", func() (bool, string) {
		got := map[string]int{}
		for _, b := range l.Backends {
			got[b.Name] = routeMTU(t, b.NS, client.String(), "from", l.Opts.VIP4.String())
		}
		ok := got[rep.Backend] == 1400
		for name, m := range got {
			if name != rep.Backend && m == 1400 {
				ok = false
			}
		}
		return ok, fmt.Sprintf("flow on %s, cached MTUs %v", rep.Backend, got)
	})
}

// Traffic that is not for a VIP still works while xlb runs: ping to the
// appliance's own address (which needs ARP), and a TCP connection to a
// management port on the appliance.
func TestEndToEndNonVIPTraffic(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 1})
	xlbIn(t, l, l.DefaultRules("IPIP"))
	mgmt := netip.AddrPortFrom(l.XLBAddr4, 2222)
	serveIn(t, l.XLB, mgmt, func(c net.Conn) {
		io.WriteString(c, "xlb management\n")
		c.Close()
	})
	if err := l.Router.Run("ip", "neigh", "flush", "all"); err != nil {
		t.Fatal(err)
	}
	if err := lab.Ping(l.Client, l.XLBAddr4, 4*time.Second); err != nil {
		t.Errorf("ping to the appliance: %v", err)
	}
	if err := lab.Ping(l.Client, l.XLBAddr6, 4*time.Second); err != nil {
		t.Errorf("ping6 to the appliance: %v", err)
	}
	var line string
	err := l.Client.Do(func() error {
		c, err := net.DialTimeout("tcp", mgmt.String(), 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		line, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	if err != nil || line != "xlb management\n" {
		t.Errorf("TCP to the management port: %q, %v", line, err)
	}
}

// A long-lived TCP connection stays up, on its backend, while 10 000 other
// connections come and go.
func TestEndToEndLongLivedConnection(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 3})
	rules := l.DefaultRules("IPIP")[:1]
	rules[0].Health = healthNone
	xlbIn(t, l, rules)
	testutil.WaitFor(t, 20*time.Second, "backends healthy", func() (bool, string) {
		res := drive(t, l, 30, 4)
		return res.OK() && res.PerBackend[0]*res.PerBackend[1]*res.PerBackend[2] > 0, fmt.Sprint(res.PerBackend)
	})
	src := l.ClientAddrs4[0]
	var conn net.Conn
	err := l.Client.Do(func() error {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 3 * time.Second}
		var err error
		conn, err = d.Dial("tcp", netip.AddrPortFrom(l.Opts.VIP4, l.Opts.HTTPPort).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	ask := func() lab.Reply {
		t.Helper()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: vip\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("long-lived connection: %v", err)
		}
		defer resp.Body.Close()
		var rep lab.Reply
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	first := ask()
	res := drive(t, l, 10000, 4)
	if !res.OK() {
		t.Fatalf("%d of 10000 connections failed: %v", res.Errors, res.FirstError)
	}
	if again := ask(); again.Backend != first.Backend {
		t.Errorf("long-lived connection moved from %s to %s", first.Backend, again.Backend)
	}
}
