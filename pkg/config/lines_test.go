package config

import "testing"

func TestScanKeyLines(t *testing.T) {
	doc := `# comment = 1
name = "x"   # trailing = comment
ports = [
  "80",   # first
  "443",
]
text = """
fake = 1
[fake]
"""
lit = '''
[[group]]
'''
"quoted key" = 1
a.b.c = true
[failover]
ratio = 0.5

[zonal_affinity.clients]
"zone-a" = ["198.51.100.0/24",
   "192.0.2.0/24"]
z.y = 1
[[group]]
name = "a"
backends = ["10.0.0.1", {address = "10.0.0.2", weight = 3}]
[[group]] # second
name = "b"
[[group.extra]]
k = 1
[[group.extra]]
k = 2
[group.sub]
s = 's'
`
	got := scanKeyLines(doc)
	want := map[string]int{
		"name":                             2,
		"ports":                            3,
		"ports[0]":                         4,
		"ports[1]":                         5,
		"text":                             7,
		"lit":                              11,
		`"quoted key"`:                     14,
		"a.b.c":                            15,
		"failover":                         16,
		"failover.ratio":                   17,
		"zonal_affinity.clients":           19,
		`zonal_affinity.clients.zone-a`:    20,
		`zonal_affinity.clients.zone-a[1]`: 21,
		"zonal_affinity.clients.z.y":       22,
		"group":                            23,
		"group[0]":                         23,
		"group[0].name":                    24,
		"group[0].backends[0]":             25,
		"group[0].backends[1].address":     25,
		"group[0].backends[1].weight":      25,
		"group[1]":                         26,
		"group[1].name":                    27,
		"group[1].extra[0].k":              29,
		"group[1].extra[1]":                30,
		"group[1].extra[1].k":              31,
		"group[1].sub.s":                   33,
	}
	for path, line := range want {
		if got[path] != line {
			t.Errorf("line of %s = %d, want %d", path, got[path], line)
		}
	}
	for _, bogus := range []string{"fake", "fake.x", "group[2]"} {
		if n, ok := got[bogus]; ok {
			t.Errorf("%s recorded at line %d; it is inside a string", bogus, n)
		}
	}
	// Fallback to the nearest ancestor.
	if n := got.line("group[1].extra[1].missing"); n != 30 {
		t.Errorf("fallback line = %d, want 30", n)
	}
	if n := got.line("nothing.here"); n != 0 {
		t.Errorf("unknown path line = %d, want 0", n)
	}
}

func TestParentPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a", ""},
		{"a.b", "a"},
		{"a.b[2]", "a.b"},
		{`a."x.y"`, "a"},
		{`a."x.y"[0]`, `a."x.y"`},
	} {
		if got := parentPath(tc.in); got != tc.want {
			t.Errorf("parentPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestLazyLines: a document's key lines are scanned at the first line a
// message asks for, not before, and give what the scan gives; the text
// is dropped then. A nil one knows no line.
func TestLazyLines(t *testing.T) {
	doc := "name = \"web\"\n\n[[group]]\nname = \"a\"\nbackends = [\n  \"10.0.0.1\",\n  \"10.0.0.2\",\n]\n"
	l := newLazyLines(doc)
	if l.lines != nil {
		t.Fatal("scanned before any line was asked for")
	}
	if got := l.line("group[0].backends[1]"); got != 7 {
		t.Errorf("group[0].backends[1] on line %d, want 7", got)
	}
	if l.text != "" || l.line("name") != 1 {
		t.Errorf("after the scan: text kept (%d bytes) or name not on line 1", len(l.text))
	}
	var none *lazyLines
	if none.line("name") != 0 {
		t.Error("a nil lazyLines knows a line")
	}
}
