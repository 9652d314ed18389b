package config

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"github.com/xlbnet/xlb/pkg/ethtool"
)

// CheckHost checks what a loaded configuration needs from the machine it
// runs on, which Load does not (a configuration may be validated
// elsewhere): the interface exists, the queues listed are among its active
// receive queues, no VIP is an address of the interface or a broadcast
// address of its prefixes, control_socket_group names a group. It runs in the
// calling thread's network namespace. xlb validate (ExecStartPre) reports
// these as errors unless --offline, so that a unit whose `xlb run` would
// fail does not start; the daemon checks them at start and on reload.
func CheckHost(cfg *Config) []Issue {
	file := filepath.Base(cfg.Path)
	issue := func(key, format string, args ...any) Issue {
		return Issue{File: file, Line: keyLine(cfg.Path, key), Key: key, Message: fmt.Sprintf(format, args...)}
	}
	var out []Issue
	if _, err := net.InterfaceByName(cfg.Interface); err != nil {
		out = append(out, issue("interface", "no interface %q on this machine (ip link lists them)", cfg.Interface))
	} else if len(cfg.Queues.List) > 0 || cfg.Queues.Count > 0 {
		if active, src, err := ethtool.ActiveRXQueues(cfg.Interface); err == nil {
			highest := cfg.Queues.Count - 1
			if n := len(cfg.Queues.List); n > 0 {
				highest = cfg.Queues.List[n-1]
			}
			if highest >= active {
				out = append(out, issue("queues", "interface %s has %d active receive queue(s), 0-%d (%s): queue %d cannot be served (ethtool -L %s combined N changes them)", cfg.Interface, active, active-1, src, highest, cfg.Interface))
			}
		}
	}
	out = append(out, ownVIPs(cfg)...)
	if g := cfg.ControlSocketGroup; g != "" && !groupExists(g) {
		out = append(out, issue("control_socket_group", "no group %q on this machine (groupadd %s, or a numeric id)", g, g))
	}
	return out
}

// groupExists reports whether group, a name or a numeric id, can be given
// to a file: any non-negative number can, a name must be known.
func groupExists(group string) bool {
	if n, err := strconv.Atoi(group); err == nil {
		return n >= 0
	}
	_, err := user.LookupGroup(group)
	return err == nil
}

// ownVIPs reports every rule whose VIP is an address of the interface or
// the broadcast address of one of its prefixes: xlb would take the
// appliance's own traffic (an L3_DEFAULT rule on it took ssh and BGP) or
// a broadcast.
func ownVIPs(cfg *Config) []Issue {
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil
	}
	var out []Issue
	for i := range cfg.Rules {
		r := cfg.Rules[i]
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			p, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			p = p.Unmap()
			ones, _ := ipn.Mask.Size()
			why := ""
			switch {
			case p == r.VIP:
				why = fmt.Sprintf("%s is an address of %s, the appliance's own: xlb would take its traffic (ssh, BGP, health checks)", r.VIP, cfg.Interface)
			case p.Is4() && r.VIP.Is4() && ones < 31 && r.VIP == broadcastOf(netip.PrefixFrom(p, ones)):
				why = fmt.Sprintf("%s is the broadcast address of %s's %s", r.VIP, cfg.Interface, netip.PrefixFrom(p, ones).Masked())
			}
			if why != "" {
				path := r.File // a display name: relative to the configuration's directory, or absolute
				if !filepath.IsAbs(path) {
					path = filepath.Join(cfg.Dir, path)
				}
				out = append(out, Issue{File: r.File, Line: keyLine(path, "vip"), Key: "vip", Message: why})
				break
			}
		}
	}
	return out
}

// keyLine finds key's line in the file at path; 0 when it cannot.
func keyLine(path, key string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return scanKeyLines(string(data)).line(key)
}

// broadcastOf is the last address of an IPv4 prefix.
func broadcastOf(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
