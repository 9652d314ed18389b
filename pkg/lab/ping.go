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
	return ns.Do(func() error { return ping(netip.Addr{}, dst, 1, timeout) })
}

// PingFrom is Ping from source address src (ping -I src) until count
// requests are answered.
func PingFrom(ns *netns.NS, src, dst netip.Addr, count int, timeout time.Duration) error {
	return ns.Do(func() error { return ping(src, dst, count, timeout) })
}

func ping(src, dst netip.Addr, count int, timeout time.Duration) error {
	network, proto, reqType, replyType := "ip4:icmp", 1, icmp.Type(ipv4.ICMPTypeEcho), icmp.Type(ipv4.ICMPTypeEchoReply)
	if dst.Is6() && !dst.Is4In6() {
		network, proto, reqType, replyType = "ip6:ipv6-icmp", 58, ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
	}
	local := ""
	if src.IsValid() {
		local = src.String()
	}
	c, err := icmp.ListenPacket(network, local)
	if err != nil {
		return fmt.Errorf("ping %s: %w", dst, err)
	}
	defer c.Close()
	id := os.Getpid() & 0xffff
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 1500)
	answered := 0
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
	read:
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break read // send the next request
				}
				return fmt.Errorf("ping %s: %w", dst, err)
			}
			m, err := icmp.ParseMessage(proto, buf[:n])
			if err != nil || m.Type != replyType {
				continue
			}
			if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq && from.(*net.IPAddr).IP.Equal(dst.AsSlice()) {
				if answered++; answered == count {
					return nil
				}
				break read
			}
		}
	}
	return fmt.Errorf("ping %s: %d of %d echo requests answered within %v", dst, answered, count, timeout)
}
