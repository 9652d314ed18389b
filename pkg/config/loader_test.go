package config

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// ruleText is a valid TCP rule named name on vip, port port.
func ruleText(name, vip, port string, backends ...string) string {
	return lines(
		`name = "`+name+`"`,
		`vip = "`+vip+`"`,
		`ports = ["`+port+`"]`,
		`[health_check]`,
		`type = "TCP"`,
		`[[group]]`,
		`name = "a"`,
		`backends = ["`+strings.Join(backends, `", "`)+`"]`,
	)
}

// withoutSources clears what only a Loader sets, to compare its result
// with Load's.
func withoutSources(c *Config) Config {
	out := *c
	out.Rules = nil
	for _, r := range c.Rules {
		cp := *r
		cp.src, cp.svc = nil, nil
		out.Rules = append(out.Rules, &cp)
	}
	return out
}

// TestLoaderReusesUnchangedFiles: a second Load parses again only the file
// that changed; the others are the same parse (SameSource) and the
// result equals Load's, whatever was reused.
func TestLoaderReusesUnchangedFiles(t *testing.T) {
	path := writeConfig(t, map[string]string{
		"rules.d/a.toml": ruleText("a", "203.0.113.10", "80", "10.0.1.10"),
		"rules.d/b.toml": ruleText("b", "203.0.113.11", "80", "10.0.1.11"),
		"rules.d/c.toml": ruleText("c", "203.0.113.12", "80", "10.0.1.12"),
	})
	var ld Loader
	first, _, err := ld.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(filepath.Dir(path), "rules.d")
	if err := os.WriteFile(filepath.Join(rules, "b.toml"), []byte(ruleText("b", "203.0.113.11", "80", "10.0.1.11", "10.0.1.99")), 0o644); err != nil {
		t.Fatal(err)
	}
	second, _, err := ld.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, true} {
		if got := second.Rules[i].SameSource(first.Rules[i]); got != want {
			t.Errorf("rule %s: SameSource %v, want %v", second.Rules[i].Name, got, want)
		}
	}
	if n := len(second.Rules[1].Backends()); n != 2 {
		t.Errorf("changed rule b has %d backends, want 2", n)
	}
	plain, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Rules[0].SameSource(plain.Rules[0]) {
		t.Error("Load's rules claim a source")
	}
	if got := withoutSources(second); !reflect.DeepEqual(got, *plain) {
		t.Errorf("Loader's config differs from Load's:\n got %+v\nwant %+v", got, *plain)
	}
	// A file removed and written again is parsed again.
	if err := os.Remove(filepath.Join(rules, "c.toml")); err != nil {
		t.Fatal(err)
	}
	third, _, err := ld.Load(path)
	if err != nil || len(third.Rules) != 2 || !third.Rules[0].SameSource(first.Rules[0]) {
		t.Fatalf("after removing c: %d rules, %v", len(third.Rules), err)
	}
	if err := os.WriteFile(filepath.Join(rules, "c.toml"), []byte(ruleText("c", "203.0.113.12", "80", "10.0.1.12")), 0o644); err != nil {
		t.Fatal(err)
	}
	fourth, _, err := ld.Load(path)
	if err != nil || fourth.Rules[2].SameSource(first.Rules[2]) {
		t.Fatalf("c written again: reused the parse from before its removal (%v)", err)
	}
}

// TestLoaderReportsAsLoad: what a load reports does not depend on what
// the Loader kept: a warning is reported on every load (a file with one
// is never kept), and an error across files names a kept file's line.
func TestLoaderReportsAsLoad(t *testing.T) {
	warned := lines(`name = "w"`, `vip = "203.0.113.20"`, `ports = ["80"]`, `[health_check]`, `type = "NONE"`, `port = 80`, `[[group]]`, `name = "a"`, `backends = ["10.0.1.20"]`)
	path := writeConfig(t, map[string]string{
		"rules.d/a.toml": ruleText("a", "203.0.113.10", "80", "10.0.1.10"),
		"rules.d/w.toml": warned,
	})
	var ld Loader
	for round := range 2 {
		_, ws, err := ld.Load(path)
		_, want, werr := Load(path)
		if err != nil || len(ws) == 0 || werr != nil || !reflect.DeepEqual(warningStrings(ws), warningStrings(want)) {
			t.Fatalf("round %d: warnings %q (%v), Load says %q (%v)", round, warningStrings(ws), err, warningStrings(want), werr)
		}
	}
	// A new file that clashes with the kept rule a: the messages are
	// Load's, with a's file and line.
	rules := filepath.Join(filepath.Dir(path), "rules.d")
	if err := os.WriteFile(filepath.Join(rules, "z.toml"), []byte(ruleText("a", "203.0.113.10", "80", "10.0.1.30")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := ld.Load(path)
	_, _, want := Load(path)
	if got, w := issueStrings(t, err), issueStrings(t, want); len(got) == 0 || !reflect.DeepEqual(got, w) {
		t.Errorf("errors %q, Load says %q", got, w)
	}
}

// BenchmarkLoad: a configuration of 1000 rules of 100 backends loaded
// whole (Load) and by a Loader after one rule file changed, and laid
// under an empty state (Apply, as a start does).
func BenchmarkLoad(b *testing.B) {
	files := map[string]string{}
	for i := range 1000 {
		var bs []string
		for j := range 100 {
			bs = append(bs, fmt.Sprintf("10.%d.%d.%d", i/200, i%200, j+1))
		}
		files[fmt.Sprintf("rules.d/r%04d.toml", i)] = ruleText(fmt.Sprintf("r%04d", i), fmt.Sprintf("198.18.%d.%d", 16+i/250, 1+i%250), "80", bs...)
	}
	path := writeConfig(b, files)
	b.Run("Load", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := Load(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Apply", func(b *testing.B) {
		cfg, _, err := Load(path)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if v := Apply(cfg, &State{}); len(v.Rules) != 1000 {
				b.Fatalf("%d rules in the view", len(v.Rules))
			}
		}
	})
	b.Run("Loader/one-changed", func(b *testing.B) {
		var ld Loader
		if _, _, err := ld.Load(path); err != nil {
			b.Fatal(err)
		}
		changed := filepath.Join(filepath.Dir(path), "rules.d", "r0500.toml")
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			text := files["rules.d/r0500.toml"]
			if i%2 == 0 {
				text = strings.Replace(text, `"10.2.100.1"`, `"10.2.100.1", "10.9.9.9"`, 1)
			}
			if err := os.WriteFile(changed, []byte(text), 0o644); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, _, err := ld.Load(path); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestLoaderSkipsUnchangedFiles: a file whose identity is the one it had
// when the Loader read it, a second or more after its last change, is not
// read again; a file changed since is, until it is a second old.
func TestLoaderSkipsUnchangedFiles(t *testing.T) {
	path := writeConfig(t, map[string]string{
		"rules.d/a.toml": ruleText("a", "203.0.113.10", "80", "10.0.1.10"),
		"rules.d/b.toml": ruleText("b", "203.0.113.11", "80", "10.0.1.11"),
	})
	ld := Loader{noWatch: true} // as without inotify (TestWatch... for the watch)
	load := func() *Config {
		t.Helper()
		cfg, _, err := ld.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	reads := func(want int, why string) {
		t.Helper()
		before := ld.reads
		load()
		if got := ld.reads - before; got != want {
			t.Errorf("%s: %d files read, want %d", why, got, want)
		}
	}
	reads(2, "first load")
	reads(2, "files changed less than a second ago")
	time.Sleep(changeMargin + 100*time.Millisecond)
	reads(2, "the first load after they aged")
	reads(0, "nothing changed")
	b := filepath.Join(filepath.Dir(path), "rules.d", "b.toml")
	if err := os.WriteFile(b, []byte(ruleText("b", "203.0.113.11", "80", "10.0.1.12")), 0o644); err != nil {
		t.Fatal(err)
	}
	reads(1, "b rewritten")
	if cfg := load(); cfg.Rules[1].Groups[0].Backends[0].Addr != netip.MustParseAddr("10.0.1.12") {
		t.Errorf("b's new backend not loaded: %v", cfg.Rules[1].Groups[0].Backends)
	}
	if err := os.Chmod(b, 0o600); err != nil { // a status change alone
		t.Fatal(err)
	}
	reads(1, "b's mode changed")
}

// TestTooManyBackendsForATable: without maglev_table_size, a rule's table
// follows its backends up to the largest table; a rule with more
// backends than that serves is refused with its file and key.
func TestTooManyBackendsForATable(t *testing.T) {
	n := MaxMaglevTableSize/MaglevBackendFactor + 1
	var b strings.Builder
	b.WriteString(lines(`name = "big"`, `vip = "203.0.113.10"`, `ports = ["80"]`, `[health_check]`, `type = "NONE"`, `[[group]]`, `name = "a"`))
	b.WriteString("backends = [")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q", netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	b.WriteString("]\n")
	path := writeConfig(t, map[string]string{"rules.d/big.toml": b.String()})
	_, _, err := Load(path)
	want := []string{fmt.Sprintf("rules.d/big.toml:6: group: %d backends: a rule has at most 167772 (100 slots each in a Maglev table of at most 16777216)", n)}
	if got := issueStrings(t, err); !reflect.DeepEqual(got, want) {
		t.Errorf("errors %q, want %q", got, want)
	}
}

// TestParallelParseIsSerial: a first load of many rule files, parsed on
// every CPU, returns what the serial parse returns: the same rules, and
// the same errors and warnings in the same order, the first bad file's
// first.
func TestParallelParseIsSerial(t *testing.T) {
	files := map[string]string{}
	for i := range 2 * parallelParseMin {
		files[fmt.Sprintf("rules.d/r%03d.toml", i)] = ruleText(fmt.Sprintf("r%03d", i), fmt.Sprintf("203.0.113.%d", i+1), "80", fmt.Sprintf("10.0.1.%d", i+1))
	}
	path := writeConfig(t, files)
	serial := func() (*Config, []Warning, error) { return LoadWithRules(path, map[string][]byte{}) } // an overlay: the serial parse
	cfg, ws, err := Load(path)
	want, wantWs, wantErr := serial()
	if err != nil || wantErr != nil || !reflect.DeepEqual(cfg, want) || !reflect.DeepEqual(ws, wantWs) {
		t.Fatalf("clean tree: parallel and serial parses differ (%v, %v)", err, wantErr)
	}
	rules := filepath.Join(filepath.Dir(path), "rules.d")
	for n, text := range map[string]string{
		"r007.toml": "name = \"r007\"\nvip = [\n",                                                       // syntax error
		"r013.toml": strings.Replace(files["rules.d/r013.toml"], `ports = ["80"]`, `ports = [true]`, 1), // wrong type
		"r021.toml": strings.Replace(files["rules.d/r021.toml"], `"r021"`, `"r002"`, 1),                 // a name taken
		"r030.toml": "protocol = \"UDP\"\n" + files["rules.d/r030.toml"],                                // warnings
	} {
		if err := os.WriteFile(filepath.Join(rules, n), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("nowhere", filepath.Join(rules, "r099.toml")); err != nil { // cannot be read
		t.Fatal(err)
	}
	_, ws, err = Load(path)
	_, wantWs, wantErr = serial()
	got, w := issueStrings(t, err), issueStrings(t, wantErr)
	if len(got) < 4 || len(ws) == 0 || !reflect.DeepEqual(got, w) || !reflect.DeepEqual(warningStrings(ws), warningStrings(wantWs)) {
		t.Errorf("errors %q\nserial %q\nwarnings %q\nserial %q", got, w, warningStrings(ws), warningStrings(wantWs))
	}
	if !strings.HasPrefix(got[0], "rules.d/r007.toml") {
		t.Errorf("first error %q, want r007's", got[0])
	}
}
