package config

import (
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"github.com/xlbnet/xlb/pkg/ethtool"
)

// CheckHost checks what a loaded configuration needs from the machine it
// runs on, which Load does not (a configuration may be validated
// elsewhere): the interface exists, the queues listed are among its active
// receive queues, control_socket_group names a group. It runs in the
// calling thread's network namespace. xlb validate (ExecStartPre) reports
// these as errors unless --offline, so that a unit whose `xlb run` would
// fail does not start; the daemon checks them at start and on reload.
func CheckHost(cfg *Config) []Issue {
	file := filepath.Base(cfg.Path)
	var lines keyLines
	if data, err := os.ReadFile(cfg.Path); err == nil {
		lines = scanKeyLines(string(data))
	}
	issue := func(key, format string, args ...any) Issue {
		return Issue{File: file, Line: lines.line(key), Key: key, Message: fmt.Sprintf(format, args...)}
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
