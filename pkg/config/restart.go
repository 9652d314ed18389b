package config

import (
	"path/filepath"
	"time"
)

// DefaultPinDir is where the XDP program's link and maps are pinned, a
// directory per interface (package ring/xsk).
const DefaultPinDir = "/sys/fs/bpf/xlb"

// readPinDir reads pin_dir: an absolute path, read when the daemon starts
// (a reload does not move the pins; they belong to the running program).
func readPinDir(t *table, cfg *Config) {
	var s string
	if !t.str("pin_dir", &s) {
		return
	}
	if !filepath.IsAbs(s) {
		t.errorf("pin_dir", "%q is not an absolute path (a directory on a bpf filesystem)", s)
		return
	}
	cfg.PinDir = filepath.Clean(s)
}

// MaxBGPGracefulRestart is the largest restart time BGP carries (12 bits
// of seconds).
const MaxBGPGracefulRestart = 4095 * time.Second

// readGracefulRestart reads [bgp] graceful_restart: the restart time a
// restarting appliance asks its routers to keep its routes for. Default 0:
// none, so a crashed appliance's routes go as soon as its sessions drop.
func readGracefulRestart(bt *table, b *BGP) {
	if bt.duration("graceful_restart", 0, MaxBGPGracefulRestart, &b.GracefulRestart) && b.GracefulRestart%time.Second != 0 {
		bt.errorf("graceful_restart", "%s is not a whole number of seconds (BGP carries seconds)", b.GracefulRestart)
	}
}
