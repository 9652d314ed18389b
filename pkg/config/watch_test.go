package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWatchSeesEveryChange: whatever changed rules_dir since the last
// load — a rename over a file, a write of the same size that keeps the
// modification time, a chmod, a file removed or added, the directory
// replaced, the watch's queue overflowing before a change — the next
// Loader.Load returns what Load returns, the changed rule included; the
// unchanged rules keep their *Rule. Files the watch cannot see change
// (a symlink, a file with another hard link) are stat'ed every load.
func TestWatchSeesEveryChange(t *testing.T) {
	a := ruleText("a", "203.0.113.10", "80", "10.0.1.10")
	b := ruleText("b", "203.0.113.11", "80", "10.0.1.11")
	c := ruleText("c", "203.0.113.12", "80", "10.0.1.12")
	c2 := ruleText("c", "203.0.113.12", "80", "10.0.1.13") // same size as c
	write := func(t *testing.T, p, text string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// sameTimes writes text into p and gives p back its modification time.
	sameTimes := func(t *testing.T, p, text string) {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		write(t, p, text)
		if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		// setup runs before the first load, change between the loads.
		setup, change func(t *testing.T, dir, rules string)
		reads         int      // files read by the second load
		same          []string // rules that keep their *Rule
		scan          bool     // the second load scans rules_dir (the watch was lost)
		// after: files read by the third load, the stat'ed files changed
		// less than a second before the second (changeMargin).
		after int
	}{
		{name: "nothing changed", change: func(*testing.T, string, string) {}, same: []string{"a", "b", "c"}},
		{name: "rename over", change: func(t *testing.T, _, rules string) {
			write(t, filepath.Join(rules, ".c.toml.swp"), c2)
			if err := os.Rename(filepath.Join(rules, ".c.toml.swp"), filepath.Join(rules, "c.toml")); err != nil {
				t.Fatal(err)
			}
		}, reads: 1, same: []string{"a", "b"}},
		{name: "same size and times within the second", change: func(t *testing.T, _, rules string) {
			sameTimes(t, filepath.Join(rules, "c.toml"), c2)
		}, reads: 1, same: []string{"a", "b"}},
		{name: "chmod", change: func(t *testing.T, _, rules string) {
			if err := os.Chmod(filepath.Join(rules, "c.toml"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, reads: 1, same: []string{"a", "b", "c"}},
		{name: "file removed", change: func(t *testing.T, _, rules string) {
			if err := os.Remove(filepath.Join(rules, "b.toml")); err != nil {
				t.Fatal(err)
			}
		}, same: []string{"a", "c"}},
		{name: "file added", change: func(t *testing.T, _, rules string) {
			write(t, filepath.Join(rules, "d.toml"), ruleText("d", "203.0.113.13", "80", "10.0.1.14"))
		}, reads: 1, same: []string{"a", "b", "c"}},
		{name: "a directory added", change: func(t *testing.T, _, rules string) {
			if err := os.Mkdir(filepath.Join(rules, "e.toml"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, same: []string{"a", "b", "c"}},
		{name: "directory replaced", change: func(t *testing.T, dir, rules string) {
			if err := os.Rename(rules, filepath.Join(dir, "rules.old")); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(rules, 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(rules, "a.toml"), a)
			write(t, filepath.Join(rules, "c.toml"), c2)
		}, reads: 2, same: []string{"a"}, scan: true}, // a: the same bytes
		{name: "directory symlink repointed", setup: func(t *testing.T, dir, rules string) {
			if err := os.Rename(rules, filepath.Join(dir, "rules.1")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("rules.1", rules); err != nil {
				t.Fatal(err)
			}
		}, change: func(t *testing.T, dir, rules string) {
			if err := os.Mkdir(filepath.Join(dir, "rules.2"), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "rules.2", "c.toml"), c2)
			if err := os.Symlink("rules.2", rules+".new"); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(rules+".new", rules); err != nil {
				t.Fatal(err)
			}
		}, reads: 1, scan: true},
		{name: "queue overflow", change: func(t *testing.T, _, rules string) {
			// More events than the queue holds (alternating files: equal
			// events in a row are merged), then a change whose event is
			// dropped.
			max := 16384
			if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
				if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					max = n
				}
			}
			if max > 1<<20 {
				t.Skipf("max_queued_events is %d: too many events to overflow in a test", max)
			}
			now := time.Now()
			for i := range max + 10 {
				if err := os.Chtimes(filepath.Join(rules, []string{"a.toml", "b.toml"}[i%2]), now, now); err != nil {
					t.Fatal(err)
				}
			}
			sameTimes(t, filepath.Join(rules, "c.toml"), c2)
		}, reads: 3, same: []string{"a", "b"}, scan: true}, // a and b: the same bytes
		{name: "hard link written from elsewhere", setup: func(t *testing.T, dir, rules string) {
			if err := os.Link(filepath.Join(rules, "c.toml"), filepath.Join(dir, "c.link")); err != nil {
				t.Fatal(err)
			}
		}, change: func(t *testing.T, dir, _ string) {
			sameTimes(t, filepath.Join(dir, "c.link"), c2)
		}, reads: 1, same: []string{"a", "b"}, after: 1},
		{name: "symlinked file's target rewritten", setup: func(t *testing.T, dir, rules string) {
			if err := os.Rename(filepath.Join(rules, "c.toml"), filepath.Join(dir, "c.target")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(dir, "c.target"), filepath.Join(rules, "c.toml")); err != nil {
				t.Fatal(err)
			}
		}, change: func(t *testing.T, dir, _ string) {
			sameTimes(t, filepath.Join(dir, "c.target"), c2)
		}, reads: 1, same: []string{"a", "b"}, after: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, map[string]string{"rules.d/a.toml": a, "rules.d/b.toml": b, "rules.d/c.toml": c})
			dir := filepath.Dir(path)
			rules := filepath.Join(dir, "rules.d")
			if tc.setup != nil {
				tc.setup(t, dir, rules)
			}
			var ld Loader
			defer ld.Close()
			first, _, err := ld.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if ld.watch == nil {
				t.Fatal("no watch set on rules_dir")
			}
			reads, scans := ld.reads, ld.scans
			tc.change(t, dir, rules)
			second, _, err := ld.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := ld.reads - reads; got != tc.reads {
				t.Errorf("%d files read, want %d", got, tc.reads)
			}
			if scanned := ld.scans > scans; scanned != tc.scan {
				t.Errorf("rules_dir scanned: %v, want %v", scanned, tc.scan)
			}
			plain, _, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := withoutSources(second); !reflect.DeepEqual(got, *plain) {
				t.Errorf("Loader's config differs from Load's:\n got %s\nwant %s", ruleList(got.Rules), ruleList(plain.Rules))
			}
			var same []string
			for _, r := range second.Rules {
				if o := first.Rule(r.Name); o == r {
					same = append(same, r.Name)
				}
			}
			if fmt.Sprint(same) != fmt.Sprint(tc.same) {
				t.Errorf("rules that kept their *Rule: %v, want %v", same, tc.same)
			}
			// The load after is a watched one again, and finds nothing.
			reads = ld.reads
			if third, _, err := ld.Load(path); err != nil || ld.watch == nil || !reflect.DeepEqual(third.Rules, second.Rules) {
				t.Errorf("the load after: %v, watch %v, same rules %v", err, ld.watch != nil, reflect.DeepEqual(third.Rules, second.Rules))
			}
			if ld.reads-reads != tc.after {
				t.Errorf("the load after read %d files, want %d", ld.reads-reads, tc.after)
			}
		})
	}
}

func ruleList(rs []*Rule) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%s%v ", r.Name, r.Backends())
	}
	return b.String()
}
