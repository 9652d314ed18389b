package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fleetKey is a valid key line (44 characters).
const fleetKey = "c2VjcmV0LWZsZWV0LWtleS0wMTIzNDU2Nzg5YWJjZGVm"

// fleetMain is mainOK with a valid [fleet] table; its lines are:
//
//	1 interface = "eth0"
//	2 hash_seed = "0x1"
//	3 [fleet]
//	4 address = "192.0.2.11"
//	5 peers = ["192.0.2.11", "192.0.2.12"]
//	6 key_file = "fleet.key"
func fleetMain(extra ...string) string {
	return mainOK + lines(append([]string{`[fleet]`, `address = "192.0.2.11"`, `peers = ["192.0.2.11", "192.0.2.12"]`, `key_file = "fleet.key"`}, extra...)...)
}

// loadFleet loads main with webRule and a key file of the given text and
// mode (0600 unless given).
func loadFleet(t *testing.T, main, keyText string, mode ...os.FileMode) (*Config, []string, []string) {
	t.Helper()
	files := map[string]string{"rules.d/web.toml": webRule, "xlb.toml": main}
	path := writeConfig(t, files)
	key := filepath.Join(filepath.Dir(path), "fleet.key")
	m := os.FileMode(0o600)
	if len(mode) > 0 {
		m = mode[0]
	}
	if keyText != "" {
		if err := os.WriteFile(key, []byte(keyText), m); err != nil {
			t.Fatal(err)
		}
		os.Chmod(key, m)
	}
	cfg, ws, err := Load(path)
	return cfg, issueStrings(t, err), warningStrings(ws)
}

func TestFleetAbsent(t *testing.T) {
	cfg, errs, _ := loadFiles(t, map[string]string{"rules.d/web.toml": webRule})
	if errs != nil || cfg.Fleet != nil {
		t.Fatalf("no [fleet]: errors %v, Fleet %+v", errs, cfg.Fleet)
	}
}

func TestFleetDefaultsAndFull(t *testing.T) {
	cfg, errs, ws := loadFleet(t, fleetMain(), "# rotated in 2026\n"+fleetKey+"\n")
	if errs != nil || len(ws) != 0 {
		t.Fatal(errs, ws)
	}
	dir := filepath.Dir(cfg.Path)
	want := &Fleet{Address: netip.MustParseAddr("192.0.2.11"), Peers: []netip.Addr{netip.MustParseAddr("192.0.2.11"), netip.MustParseAddr("192.0.2.12")},
		Port: 9642, KeyFile: filepath.Join(dir, "fleet.key"), Keys: [][]byte{[]byte(fleetKey)}, JoinTimeout: 5 * time.Second,
		MaxExceptions: 1 << 18, SendRate: 50000, Refresh: 10 * time.Second}
	if !reflect.DeepEqual(cfg.Fleet, want) {
		t.Errorf("Fleet = %+v\nwant %+v", cfg.Fleet, want)
	}
	if o := cfg.Fleet.Others(); len(o) != 1 || o[0] != netip.MustParseAddr("192.0.2.12") {
		t.Errorf("Others = %v", o)
	}
	full := fleetMain(`port = 7000`, `join_timeout = "2s"`, `max_exceptions = 100000`, `send_rate = 20000`, `refresh = "5s"`)
	cfg, errs, ws = loadFleet(t, full, fleetKey+"\n"+strings.Repeat("k", 32)+"\n")
	if errs != nil || len(ws) != 0 {
		t.Fatal(errs, ws)
	}
	f := cfg.Fleet
	if f.Port != 7000 || f.JoinTimeout != 2*time.Second || f.MaxExceptions != 100000 || f.SendRate != 20000 || f.Refresh != 5*time.Second || len(f.Keys) != 2 {
		t.Errorf("full [fleet] read as %+v", f)
	}
}

// TestFleetErrors: every bad [fleet] input is rejected with file:line: key:.
func TestFleetErrors(t *testing.T) {
	idle20 := strings.Replace(webRule, "[health_check]", "[connection_tracking]\nidle_timeout = \"20s\"\n[health_check]", 1)
	for _, tc := range []struct {
		name, main, key string
		want            []string
	}{
		{"address missing", strings.Replace(fleetMain(), `address = "192.0.2.11"`, `port = 9642`, 1), fleetKey,
			[]string{"xlb.toml:3: fleet.address: missing (this appliance's address on the fleet network, which its peers send to)"}},
		{"address bad", strings.Replace(fleetMain(), `address = "192.0.2.11"`, `address = "a1"`, 1), fleetKey,
			[]string{`xlb.toml:4: fleet.address: "a1" is not an IPv4 or IPv6 address`}},
		{"peers missing", strings.Replace(fleetMain(), `peers = ["192.0.2.11", "192.0.2.12"]`, `port = 9642`, 1), fleetKey,
			[]string{"xlb.toml:3: fleet.peers: missing (every appliance's fleet address; this one's may be listed too)"}},
		{"peer bad and twice", strings.Replace(fleetMain(), `peers = ["192.0.2.11", "192.0.2.12"]`, `peers = ["192.0.2.12", "x", "192.0.2.12", 7]`, 1), fleetKey,
			[]string{`xlb.toml:5: fleet.peers[1]: "x" is not an IPv4 or IPv6 address`, `xlb.toml:5: fleet.peers[2]: 192.0.2.12 is also fleet.peers[0]`, `xlb.toml:5: fleet.peers[3]: want an address as a string, got an integer`}},
		{"only itself", strings.Replace(fleetMain(), `peers = ["192.0.2.11", "192.0.2.12"]`, `peers = ["192.0.2.11"]`, 1), fleetKey,
			[]string{"xlb.toml:5: fleet.peers: lists only this appliance (192.0.2.11): a fleet needs another"}},
		{"mixed families", strings.Replace(fleetMain(), `"192.0.2.12"]`, `"2001:db8::12"]`, 1), fleetKey,
			[]string{"xlb.toml:5: fleet.peers: 2001:db8::12 is not of the family of fleet.address 192.0.2.11"}},
		{"key file missing", fleetMain(), "",
			[]string{"xlb.toml:6: fleet.key_file: read fleet keys: open "}},
		{"key too short", fleetMain(), "# c\nshort\n",
			[]string{"xlb.toml:6: fleet.key_file: ", "fleet.key:2: key is 5 bytes, want at least 32 (e.g. head -c 32 /dev/urandom | base64)"}},
		{"key file without keys", fleetMain(), "# nothing\n",
			[]string{"xlb.toml:6: fleet.key_file: ", "fleet.key: no key (one per line, at least 32 bytes)"}},
		{"key_file missing", strings.Replace(fleetMain(), `key_file = "fleet.key"`, `port = 9642`, 1), fleetKey,
			[]string{"xlb.toml:3: fleet.key_file: missing (the file of the fleet's authentication key: head -c 32 /dev/urandom | base64 > fleet.key, the same on every appliance)"}},
		{"port 179", fleetMain(`port = 179`), fleetKey, []string{"xlb.toml:7: fleet.port: 179 is BGP's port"}},
		{"rate too low", fleetMain(`send_rate = 10`), fleetKey, []string{"xlb.toml:7: fleet.send_rate: 10 is outside [100, 10000000]"}},
		{"too few exceptions", fleetMain(`max_exceptions = 10`), fleetKey, []string{"xlb.toml:7: fleet.max_exceptions: 10 is outside [1024, 16777216]"}},
		{"unknown key", fleetMain(`peer = "192.0.2.13"`), fleetKey, []string{"xlb.toml:7: fleet.peer: unknown key (did you mean peers?)"}},
		{"refresh too long for a rule", fleetMain(`refresh = "15s"`), fleetKey, []string{"xlb.toml:7: fleet.refresh: 15s is more than half the idle timeout 20s of rule web: an exception in use would expire on the peers between two refreshes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"rules.d/web.toml": idle20, "xlb.toml": tc.main}
			path := writeConfig(t, files)
			if tc.key != "" {
				os.WriteFile(filepath.Join(filepath.Dir(path), "fleet.key"), []byte(tc.key), 0o600)
			}
			cfg, _, err := Load(path)
			if cfg != nil {
				t.Fatalf("accepted: %+v", cfg.Fleet)
			}
			errs := strings.Join(issueStrings(t, err), "\n")
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("errors:\n%s\nlack %q", errs, w)
				}
			}
		})
	}
}

// TestFleetKeyModeWarning: a key file others can read is accepted with a
// warning that says how to fix it.
func TestFleetKeyModeWarning(t *testing.T) {
	cfg, errs, ws := loadFleet(t, fleetMain(), fleetKey, 0o644)
	if errs != nil || cfg.Fleet == nil {
		t.Fatal(errs)
	}
	if len(ws) != 1 || !strings.Contains(ws[0], "xlb.toml:6: fleet.key_file: ") || !strings.HasSuffix(ws[0], "is mode 0644: other users can read the fleet key (chmod 600)") {
		t.Errorf("warnings %q", ws)
	}
}

// TestFleetExample uncomments the [fleet] block of deploy/examples/xlb.toml
// (with its key_file pointed at a test key) and loads it: the documented
// example must be valid.
func TestFleetExample(t *testing.T) {
	b, err := os.ReadFile("../../deploy/examples/xlb.toml")
	if err != nil {
		t.Fatal(err)
	}
	main := uncommentBlock(t, string(b), "[fleet]", func(key, line string) string { // bgp_test.go
		if key == "key_file" {
			return `key_file = "fleet.key"`
		}
		return line
	})
	cfg, errs, ws := loadFleet(t, main, fleetKey)
	if errs != nil || len(ws) != 0 {
		t.Fatalf("the uncommented example:\n%s\nerrors %v, warnings %v", main, errs, ws)
	}
	if cfg.Fleet == nil || len(cfg.Fleet.Others()) == 0 || cfg.Fleet.KeyFile == "" {
		t.Errorf("example read as %+v", cfg.Fleet)
	}
}

// TestFleetGuideSnippet: the [fleet] table deploy/fleet.md shows reads as
// written (its key file pointed at a test key).
func TestFleetGuideSnippet(t *testing.T) {
	b, err := os.ReadFile("../../deploy/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "## One connection table")
	if i < 0 {
		t.Fatal("deploy/fleet.md has no section on [fleet]")
	}
	start := strings.Index(text[i:], "```toml\n")
	if start < 0 {
		t.Fatal("its section has no ```toml block")
	}
	block := text[i+start+len("```toml\n"):]
	block = block[:strings.Index(block, "```")]
	block = strings.Replace(block, `"/etc/xlb/fleet.key"`, `"fleet.key"`, 1)
	cfg, errs, ws := loadFleet(t, mainOK+block, fleetKey)
	if errs != nil || len(ws) != 0 {
		t.Fatalf("deploy/fleet.md's [fleet]:\n%s\nerrors %v, warnings %v", block, errs, ws)
	}
	if f := cfg.Fleet; f == nil || len(f.Others()) != 2 || f.Address != netip.MustParseAddr("192.0.2.11") {
		t.Errorf("read as %+v", cfg.Fleet)
	}
}
