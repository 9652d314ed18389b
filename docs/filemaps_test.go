package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// mapLine is a line of a doc.go's file map: a tab-indented comment line
// starting with one or more file names ("//	ctl.go   the commands…").
var mapLine = regexp.MustCompile(`^//\t([a-z0-9_]+\.go(?:, [a-z0-9_]+\.go)*)(?:\s|$)`)

// TestFileMaps: a doc.go that lists which file holds which concern lists
// every file of its package, and only those, so new code finds its place
// and the map cannot go stale (docs/design.md#where-new-code-goes).
func TestFileMaps(t *testing.T) {
	top := root(t)
	docs, err := filepath.Glob(filepath.Join(top, "*", "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pattern := range []string{"*/*/doc.go", "*/*/*/doc.go"} {
		more, err := filepath.Glob(filepath.Join(top, pattern))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, more...)
	}
	maps := 0
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		listed := make(map[string]bool)
		for _, line := range strings.Split(string(data), "\n") {
			if m := mapLine.FindStringSubmatch(line); m != nil {
				for _, f := range strings.Split(m[1], ", ") {
					listed[f] = true
				}
			}
		}
		if len(listed) == 0 {
			continue
		}
		maps++
		dir := filepath.Dir(doc)
		rel, _ := filepath.Rel(top, doc)
		rel = filepath.ToSlash(rel)
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		for _, f := range files {
			name := filepath.Base(f)
			if strings.HasSuffix(name, "_test.go") || name == "doc.go" {
				continue
			}
			if !listed[name] {
				missing = append(missing, name)
			}
			delete(listed, name)
		}
		var gone []string
		for f := range listed {
			gone = append(gone, f)
		}
		sort.Strings(gone)
		if len(missing) > 0 {
			t.Errorf("%s: the file map lacks %s: say what each holds", rel, strings.Join(missing, ", "))
		}
		if len(gone) > 0 {
			t.Errorf("%s: the file map lists %s, which the package does not have", rel, strings.Join(gone, ", "))
		}
	}
	if maps < 3 {
		t.Errorf("found %d doc.go file maps, want at least 3 (cmd/xlb, pkg/config, pkg/daemon)", maps)
	}
}
