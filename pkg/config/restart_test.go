package config

import (
	"reflect"
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
