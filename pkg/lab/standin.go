package lab

import (
	"fmt"
	"net/netip"
)

// KernelForward makes the appliance namespace forward both VIPs to
// backend i with plain kernel routing (no encapsulation: the kernel
// rewrites the MAC, as DIRECT does). It is the stand-in for xlb in tests
// of the lab itself and the fallback of the demo; StopKernelForward undoes
// it before the real forwarder takes the interface.
func (l *Lab) KernelForward(i int) error {
	if i < 0 || i >= len(l.Backends) {
		return fmt.Errorf("kernel forward: no backend %d", i)
	}
	b := l.Backends[i]
	if err := sysctls(l.XLB, map[string]string{
		"net/ipv4/ip_forward":          "1",
		"net/ipv6/conf/all/forwarding": "1",
	}); err != nil {
		return fmt.Errorf("kernel forward: %w", err)
	}
	err := batch(l.XLB, []string{
		fmt.Sprintf("route replace %s via %s", netip.PrefixFrom(l.Opts.VIP4, 32), b.Link4),
		fmt.Sprintf("route replace %s via %s", netip.PrefixFrom(l.Opts.VIP6, 128), b.Link6),
	})
	if err != nil {
		return fmt.Errorf("kernel forward: %w", err)
	}
	return nil
}

// StopKernelForward removes the VIP routes and turns forwarding off in
// the appliance namespace.
func (l *Lab) StopKernelForward() error {
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
