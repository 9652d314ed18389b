package lab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/xlbnet/xlb/pkg/netns"
)

// Ping sends ICMP echo requests from namespace ns to dst until one is
// answered or timeout passes: ping(8) in Go, so tests need no iputils
// (it needs root, as the lab does: a raw ICMP socket).
func Ping(ns *netns.NS, dst netip.Addr, timeout time.Duration) error {
	return ns.Do(func() error { return ping(dst, timeout) })
}

func ping(dst netip.Addr, timeout time.Duration) error {
	network, proto, reqType, replyType := "ip4:icmp", 1, icmp.Type(ipv4.ICMPTypeEcho), icmp.Type(ipv4.ICMPTypeEchoReply)
	if dst.Is6() && !dst.Is4In6() {
		network, proto, reqType, replyType = "ip6:ipv6-icmp", 58, ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
	}
	c, err := icmp.ListenPacket(network, "")
	if err != nil {
		return fmt.Errorf("ping %s: %w", dst, err)
	}
	defer c.Close()
	id := os.Getpid() & 0xffff
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 1500)
	for seq := 1; time.Now().Before(deadline); seq++ {
		msg := icmp.Message{Type: reqType, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("xlb lab ping")}}
		b, err := msg.Marshal(nil) // the kernel fills in the ICMPv6 checksum
		if err != nil {
			return err
		}
		if _, err := c.WriteTo(b, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
			return fmt.Errorf("ping %s: %w", dst, err)
		}
		wait := min(time.Until(deadline), time.Second)
		c.SetReadDeadline(time.Now().Add(wait))
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break // send the next request
				}
				return fmt.Errorf("ping %s: %w", dst, err)
			}
			m, err := icmp.ParseMessage(proto, buf[:n])
			if err != nil || m.Type != replyType {
				continue
			}
			if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && from.(*net.IPAddr).IP.Equal(dst.AsSlice()) {
				return nil
			}
		}
	}
	return fmt.Errorf("ping %s: no echo reply within %v", dst, timeout)
}
