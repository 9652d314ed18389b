// Package docs holds the project's design document (design.md) and the
// tests that keep the tree's references to it true.
package docs

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// citation is how code and documents point into the design document:
// docs/design.md#<anchor> (or a relative link ending in design.md#<anchor>).
var citation = regexp.MustCompile(`design\.md#([A-Za-z0-9_-]+)`)

// localLink is a link from design.md to one of its own sections.
var localLink = regexp.MustCompile(`\]\(#([A-Za-z0-9_-]+)\)`)

// Tracker references a clone cannot follow: an issue number, or the
// starting brief by its old name. Built from pieces so that this file does
// not match itself.
var (
	trackerRef = regexp.MustCompile(`(?i)\b` + "iss" + `ues?\s+#?[0-9]+`)
	briefRef   = regexp.MustCompile(`\b` + "DES" + `IGN\b`)
)

// section is one heading of design.md.
type section struct {
	level  int
	title  string
	anchor string
	line   int
}

// root is the module's root directory (the one holding go.mod).
func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// anchorOf is GitHub's anchor for a heading: lower case, everything but
// letters, digits, '-' and '_' dropped, spaces turned into hyphens.
func anchorOf(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// sections reads the headings of design.md, outside code blocks.
func sections(t *testing.T) []section {
	t.Helper()
	data, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []section
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		title := strings.TrimSpace(line[level:])
		if level > 6 || title == "" || line[level] != ' ' {
			continue
		}
		out = append(out, section{level: level, title: title, anchor: anchorOf(title), line: n})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// anchors is the set of anchors design.md defines.
func anchors(t *testing.T) map[string]section {
	t.Helper()
	m := make(map[string]section)
	for _, s := range sections(t) {
		m[s.anchor] = s
	}
	return m
}

// textFiles calls fn for every text file of the repository (binary files,
// those with a NUL byte, and hidden directories such as .git are skipped;
// .ci is read).
func textFiles(t *testing.T, fn func(rel string, data []byte)) {
	t.Helper()
	top := root(t)
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != top && strings.HasPrefix(name, ".") && name != ".ci" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.IndexByte(data, 0) >= 0 {
			return nil
		}
		rel, err := filepath.Rel(top, path)
		if err != nil {
			return err
		}
		fn(filepath.ToSlash(rel), data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// lineOf is the 1-based line of byte offset off in data.
func lineOf(data []byte, off int) int {
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// TestAnchorsUnique: two headings with one anchor would make a citation
// ambiguous (GitHub numbers the second).
func TestAnchorsUnique(t *testing.T) {
	seen := make(map[string]section)
	for _, s := range sections(t) {
		if prev, ok := seen[s.anchor]; ok {
			t.Errorf("design.md:%d: heading %q has the anchor #%s of line %d's %q", s.line, s.title, s.anchor, prev.line, prev.title)
		}
		seen[s.anchor] = s
	}
	if len(seen) < 10 {
		t.Fatalf("design.md has %d headings: the document is missing or unreadable", len(seen))
	}
}

// TestCitationsResolve: every docs/design.md#<anchor> in the repository, and
// every link of design.md to its own sections, names a section that exists.
func TestCitationsResolve(t *testing.T) {
	have := anchors(t)
	cited := 0
	textFiles(t, func(rel string, data []byte) {
		check := func(re *regexp.Regexp) {
			for _, m := range re.FindAllSubmatchIndex(data, -1) {
				cited++
				a := string(data[m[2]:m[3]])
				if _, ok := have[a]; !ok {
					t.Errorf("%s:%d: cites docs/design.md#%s, which has no such section", rel, lineOf(data, m[0]), a)
				}
			}
		}
		check(citation)
		if rel == "docs/design.md" {
			check(localLink)
		}
	})
	if cited < 50 {
		t.Errorf("found %d citations of the design document; the scan is broken or the citations are gone", cited)
	}
}

// TestNoTrackerReferences: code and documents say what they mean, or point
// into the design document; a clone has no issue tracker and no starting
// brief to look things up in.
func TestNoTrackerReferences(t *testing.T) {
	textFiles(t, func(rel string, data []byte) {
		if rel == "LICENSE" {
			return
		}
		for _, re := range []*regexp.Regexp{trackerRef, briefRef} {
			for _, m := range re.FindAllIndex(data, -1) {
				t.Errorf("%s:%d: %q refers to something a clone does not have: write the sentence it stood for, or cite docs/design.md#<section>", rel, lineOf(data, m[0]), data[m[0]:m[1]])
			}
		}
	})
}

// TestTrackerPatterns keeps the two patterns above able to fail.
func TestTrackerPatterns(t *testing.T) {
	for _, tc := range []struct {
		text string
		re   *regexp.Regexp
		want bool
	}{
		{"(" + "issue" + " 14)", trackerRef, true},
		{"Issue" + " 9: the packet path", trackerRef, true},
		{"issues" + " 6 and 9", trackerRef, true},
		{"config.Issue values", trackerRef, false},
		{"DES" + "IGN §3", briefRef, true},
		{"the design document", briefRef, false},
	} {
		if got := tc.re.MatchString(tc.text); got != tc.want {
			t.Errorf("%v matches %q: %v, want %v", tc.re, tc.text, got, tc.want)
		}
	}
}

// TestWireTestsCiteTheContract: every TestWire* lab test says, in its doc
// comment, which rows of the behaviour contract it checks.
func TestWireTestsCiteTheContract(t *testing.T) {
	contract := make(map[string]bool)
	in := false
	for _, s := range sections(t) {
		if s.level <= 2 {
			in = s.anchor == "behaviour-contract"
		}
		if in {
			contract[s.anchor] = true
		}
	}
	if len(contract) < 10 {
		t.Fatalf("the behaviour contract has %d sections", len(contract))
	}
	dir := filepath.Join(root(t), "cmd", "xlb")
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	wires := 0
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "TestWire") {
				continue
			}
			wires++
			doc := ""
			if fn.Doc != nil {
				doc = fn.Doc.Text()
			}
			ok = false
			for _, m := range citation.FindAllStringSubmatch(doc, -1) {
				ok = ok || contract[m[1]]
			}
			if !ok {
				t.Errorf("%s: %s cites no section of docs/design.md#behaviour-contract in its doc comment", fset.Position(fn.Pos()), fn.Name.Name)
			}
		}
	}
	if wires < 10 {
		t.Errorf("found %d TestWire tests in cmd/xlb", wires)
	}
}

// floorRow matches a row of the table in design.md#floors.
var floorRow = regexp.MustCompile("^\\| `([a-z0-9/-]+)` \\| ([0-9]+) \\| (yes|) \\|")

// packages maps every package directory of the module (relative path) to
// the module packages its non-test files import.
func packages(t *testing.T) map[string][]string {
	t.Helper()
	top := root(t)
	mod, err := os.ReadFile(filepath.Join(top, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var prefix string
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			prefix = f[1] + "/"
		}
	}
	if prefix == "" {
		t.Fatal("go.mod names no module")
	}
	pkgs := make(map[string][]string)
	fset := token.NewFileSet()
	err = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != top && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != top {
				return filepath.SkipDir // a nested module is not one of ours
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(top, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if _, ok := pkgs[rel]; !ok {
			pkgs[rel] = nil
		}
		if strings.HasSuffix(name, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range file.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if strings.HasPrefix(p, prefix) {
				pkgs[rel] = append(pkgs[rel], strings.TrimPrefix(p, prefix))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// floors computes each package's floor: 0 without module imports, else one
// above the highest floor it imports.
func floors(t *testing.T, pkgs map[string][]string) map[string]int {
	t.Helper()
	floor := make(map[string]int)
	visiting := make(map[string]bool)
	var visit func(p string) int
	visit = func(p string) int {
		if f, ok := floor[p]; ok {
			return f
		}
		if visiting[p] {
			t.Fatalf("import cycle through %s", p)
		}
		visiting[p] = true
		f := 0
		for _, q := range pkgs[p] {
			f = max(f, visit(q)+1)
		}
		visiting[p] = false
		floor[p] = f
		return f
	}
	for p := range pkgs {
		visit(p)
	}
	return floor
}

// floorTable reads the table of design.md#floors: each package's stated
// floor, and the packages marked core.
func floorTable(t *testing.T) (stated map[string]int, core map[string]bool) {
	t.Helper()
	data, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	stated, core = make(map[string]int), make(map[string]bool)
	for _, line := range strings.Split(string(data), "\n") {
		if m := floorRow.FindStringSubmatch(line); m != nil {
			stated[m[1]], _ = strconv.Atoi(m[2])
			core[m[1]] = m[3] == "yes"
		}
	}
	return stated, core
}

// TestFloors: the table in design.md#floors is the module's import
// layering; a package missing from it, or on another floor, fails.
func TestFloors(t *testing.T) {
	stated, _ := floorTable(t)
	pkgs := packages(t)
	got := floors(t, pkgs)
	var names []string
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		want, ok := stated[p]
		switch {
		case !ok:
			t.Errorf("package %s (floor %d) is missing from docs/design.md#floors: add \"| `%s` | %d | yes if it is on the packet path | what it owns |\"", p, got[p], p, got[p])
		case want != got[p]:
			t.Errorf("docs/design.md#floors puts %s on floor %d; its imports %v put it on floor %d", p, want, pkgs[p], got[p])
		}
	}
	for p := range stated {
		if _, ok := pkgs[p]; !ok {
			t.Errorf("docs/design.md#floors lists %s, which is not a package of the module", p)
		}
	}
}

// TestCoreImportsOnlyCore: the packages the table in design.md#floors marks
// core (the appliance's core and the packet path) import only each other,
// never configuration, health, control or the daemon
// (docs/design.md#why-the-core-stands-at-the-top).
func TestCoreImportsOnlyCore(t *testing.T) {
	_, marked := floorTable(t)
	core := make(map[string]bool)
	for p, c := range marked {
		if c {
			core[p] = true
		}
	}
	if len(core) < 4 {
		t.Fatalf("design.md#floors marks %d packages core", len(core))
	}
	pkgs := packages(t)
	for p := range core {
		for _, q := range pkgs[p] {
			if !core[q] {
				t.Errorf("%s imports %s: the core imports only the core (docs/design.md#why-the-core-stands-at-the-top); mark %s core in docs/design.md#floors if it belongs to the packet path", p, q, q)
			}
		}
	}
}
