package config

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/BurntSushi/toml"
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

// PinRoot returns the pin root (pin_dir, DefaultPinDir when unset) and the
// interface the configuration at path names; ring/xsk.PinDir turns them
// into the pins' directory. It reads only those two keys, so that a
// configuration being edited does not keep `xlb stop` from removing what a
// crashed daemon left.
func PinRoot(path string) (root, ifname string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	var v struct {
		Interface string `toml:"interface"`
		PinDir    string `toml:"pin_dir"`
	}
	if _, err := toml.Decode(string(data), &v); err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	if v.Interface == "" {
		return "", "", fmt.Errorf("%s: no interface", path)
	}
	if v.PinDir == "" {
		v.PinDir = DefaultPinDir
	}
	return v.PinDir, v.Interface, nil
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

// Flood defence defaults ([conntrack]): Katran's 125 k new connections per
// second and core, per queue here (one worker per queue and core); an
// insert into a full table costs 80-170 CPU-ns (BenchmarkConntrack), so
// the limit keeps inserts under 2 % of a worker's core. Bursts of a
// quarter second. A new entry lives 5 s until confirmed.
const (
	DefaultNewEntriesPerSecond = 125000
	MaxNewEntriesPerSecond     = 1 << 30
	DefaultUnconfirmedIdle     = 5 * time.Second
)

// readFloodLimits reads new_entries_per_second (0: no limit),
// new_entries_burst (default a quarter of the rate) and
// unconfirmed_idle_timeout.
func readFloodLimits(ct *table, c *Conntrack) {
	if ct.intField("new_entries_per_second", 0, MaxNewEntriesPerSecond, &c.NewEntriesPerSecond) && !ct.has("new_entries_burst") {
		c.NewEntriesBurst = c.NewEntriesPerSecond / 4
	}
	ct.intField("new_entries_burst", 1, MaxNewEntriesPerSecond, &c.NewEntriesBurst)
	ct.duration("unconfirmed_idle_timeout", time.Second, time.Hour, &c.UnconfirmedIdle)
}
