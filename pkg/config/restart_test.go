package config

import (
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestFloodLimits: [conntrack]'s flood keys, their defaults, the burst
// following the rate, and their errors.
func TestFloodLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []string
		want Conntrack
		errs []string
	}{
		{"defaults", nil, Conntrack{MaxEntries: 1 << 20, NewEntriesPerSecond: 125000, NewEntriesBurst: 31250, UnconfirmedIdle: 5 * time.Second}, nil},
		{"rate only: burst a quarter of it", []string{`new_entries_per_second = 40000`},
			Conntrack{MaxEntries: 1 << 20, NewEntriesPerSecond: 40000, NewEntriesBurst: 10000, UnconfirmedIdle: 5 * time.Second}, nil},
		{"no limit", []string{`new_entries_per_second = 0`, `new_entries_burst = 1`, `unconfirmed_idle_timeout = "2s"`},
			Conntrack{MaxEntries: 1 << 20, NewEntriesBurst: 1, UnconfirmedIdle: 2 * time.Second}, nil},
		{"bad", []string{`new_entries_per_second = -1`, `new_entries_burst = 0`, `unconfirmed_idle_timeout = "100ms"`}, Conntrack{}, []string{
			"xlb.toml:4: conntrack.new_entries_per_second: -1 is outside [0, 1073741824]",
			"xlb.toml:5: conntrack.new_entries_burst: 0 is outside [1, 1073741824]",
			"xlb.toml:6: conntrack.unconfirmed_idle_timeout: 100ms is outside [1s, 3600s]",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			main := mainOK + lines(append([]string{"[conntrack]"}, tc.keys...)...)
			cfg, errs, _ := loadFiles(t, map[string]string{"xlb.toml": main, "rules.d/web.toml": webRule})
			if tc.errs != nil {
				if !reflect.DeepEqual(errs, tc.errs) {
					t.Fatalf("errors:\n%q\nwant\n%q", errs, tc.errs)
				}
				return
			}
			if errs != nil {
				t.Fatal(errs)
			}
			if cfg.Conntrack != tc.want {
				t.Errorf("conntrack = %+v, want %+v", cfg.Conntrack, tc.want)
			}
		})
	}
}

// TestPinRoot: `xlb stop` finds the pins of a configuration by its
// interface and pin_dir alone, even while the rest of it is invalid.
func TestPinRoot(t *testing.T) {
	for _, tc := range []struct {
		name        string
		text        string
		root, ifn   string
		errorSaying string
	}{
		{"pin_dir given", lines(`interface = "eth1"`, `pin_dir = "/sys/fs/bpf/other"`), "/sys/fs/bpf/other", "eth1", ""},
		{"default pin_dir", mainOK, DefaultPinDir, "eth0", ""},
		{"the rest invalid", lines(`interface = "eth2"`, `hash_seed = 7`, `no_such_key = true`, `[conntrack]`, `max_entries = -1`), DefaultPinDir, "eth2", ""},
		{"no interface", lines(`pin_dir = "/sys/fs/bpf/other"`), "", "", "xlb.toml: no interface"},
		{"not TOML", lines(`interface = "eth0`), "", "", "xlb.toml: toml: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, map[string]string{"xlb.toml": tc.text})
			root, ifn, err := PinRoot(path)
			if tc.errorSaying != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errorSaying) {
					t.Fatalf("error %v, want one saying %q", err, tc.errorSaying)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if root != tc.root || ifn != tc.ifn {
				t.Errorf("PinRoot = %q, %q; want %q, %q", root, ifn, tc.root, tc.ifn)
			}
		})
	}
	if _, _, err := PinRoot(filepath.Join(t.TempDir(), "missing.toml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want a not-exist error", err)
	}
}
