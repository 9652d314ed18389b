package config

import (
	"slices"
	"strings"
)

// LoadWithRules is Load as if rules_dir held the files of overlay: a name
// (a file name in rules_dir, "web.toml") with content replaces or adds that
// file, a name with nil content removes it. Nothing is written: a
// program that writes rule files (xlb k8s) checks the whole configuration
// they would make, with the checks of `xlb validate`, before it writes
// them. Issues name the overlay's files as if they were in rules_dir.
func LoadWithRules(path string, overlay map[string][]byte) (*Config, []Warning, error) {
	return load(path, nil, overlay)
}

// overlayNames is the rule file names of rules_dir (files) with the
// overlay's additions and removals.
func (l *loader) overlayNames(files []string) []string {
	for n, data := range l.overlay {
		if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".toml") || strings.Contains(n, "/") {
			continue
		}
		i := slices.Index(files, n)
		switch {
		case data == nil && i >= 0:
			files = slices.Delete(files, i, i+1)
		case data != nil && i < 0:
			files = append(files, n)
		}
	}
	return files
}
