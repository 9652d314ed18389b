package config

import "path/filepath"

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
