package lab

import (
	"fmt"
	"net/netip"
	"strings"
)

// KernelForward makes the appliance namespace forward both VIPs to the
// given backends with plain kernel routing: no encapsulation, the kernel
// rewrites the MAC as DIRECT does. With several backends the route is
// ECMP with the L4 (5-tuple) multipath hash, a crude load balancer with no
// connection tracking. It is the stand-in for xlb in tests of the lab
// itself and the demo's fallback; StopKernelForward undoes it before the
// real forwarder takes the interface. Calling it again replaces the
// routes.
func (l *Lab) KernelForward(backends ...int) error {
	if len(backends) == 0 {
		return fmt.Errorf("kernel forward: no backends given")
	}
	var hops4, hops6 []string
	for _, i := range backends {
		if i < 0 || i >= len(l.Backends) {
			return fmt.Errorf("kernel forward: no backend %d", i)
		}
		b := l.Backends[i]
		hops4 = append(hops4, "nexthop via "+b.Link4.String())
		hops6 = append(hops6, "nexthop via "+b.Link6.String())
	}
	if err := sysctls(l.XLB, map[string]string{
		"net/ipv4/ip_forward":                "1",
		"net/ipv6/conf/all/forwarding":       "1",
		"net/ipv4/fib_multipath_hash_policy": "1",
		"net/ipv6/fib_multipath_hash_policy": "1",
	}); err != nil {
		return fmt.Errorf("kernel forward: %w", err)
	}
	err := batch(l.XLB, []string{
		fmt.Sprintf("route replace %s %s", netip.PrefixFrom(l.Opts.VIP4, 32), strings.Join(hops4, " ")),
		fmt.Sprintf("route replace %s %s", netip.PrefixFrom(l.Opts.VIP6, 128), strings.Join(hops6, " ")),
	})
	if err != nil {
		return fmt.Errorf("kernel forward: %w", err)
	}
	return nil
}

// StopKernelForward removes the VIP routes and turns forwarding off in
// the appliance namespace.
func (l *Lab) StopKernelForward() error {
	// The routes may be gone already; only the sysctls must succeed.
	_ = batch(l.XLB, []string{
		fmt.Sprintf("route del %s", netip.PrefixFrom(l.Opts.VIP4, 32)),
		fmt.Sprintf("route del %s", netip.PrefixFrom(l.Opts.VIP6, 128)),
	})
	if err := sysctls(l.XLB, map[string]string{
		"net/ipv4/ip_forward":          "0",
		"net/ipv6/conf/all/forwarding": "0",
	}); err != nil {
		return fmt.Errorf("stop kernel forward: %w", err)
	}
	return nil
}
