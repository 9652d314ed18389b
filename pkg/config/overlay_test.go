package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLoadWithRules: the overlay's files replace, add and remove rule files
// as if written, and nothing is written.
func TestLoadWithRules(t *testing.T) {
	other := strings.ReplaceAll(strings.ReplaceAll(webRule, `"web"`, `"api"`), "203.0.113.10", "203.0.113.11")
	tests := []struct {
		name    string
		overlay map[string][]byte
		rules   []string // rule names loaded, when valid
		errs    []string // else the issues
	}{
		{"none", nil, []string{"web"}, nil},
		{"add", map[string][]byte{"api.toml": []byte(other)}, []string{"api", "web"}, nil},
		{"replace", map[string][]byte{"web.toml": []byte(other)}, []string{"api"}, nil},
		{"remove", map[string][]byte{"web.toml": nil, "api.toml": []byte(other)}, []string{"api"}, nil},
		{"remove absent", map[string][]byte{"gone.toml": nil}, []string{"web"}, nil},
		{"hidden and foreign names ignored", map[string][]byte{".x.toml": []byte("bad"), "x.txt": []byte("bad")}, []string{"web"}, nil},
		{"bad addition", map[string][]byte{"api.toml": []byte(strings.Replace(other, `ports = ["80"]`, `ports = ["70000"]`, 1))},
			nil, []string{`rules.d/api.toml:3: ports[0]: "70000" is outside [1, 65535]`}},
		{"overlap with a file on disk", map[string][]byte{"api.toml": []byte(strings.ReplaceAll(other, "203.0.113.11", "203.0.113.10"))},
			// The later file by name gets the error: here the one on disk.
			nil, []string{`rules.d/web.toml:3: ports: 80 overlaps rule "api" (rules.d/api.toml) on 203.0.113.10 TCP (port 80)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, map[string]string{"rules.d/web.toml": webRule})
			cfg, _, err := LoadWithRules(path, tc.overlay)
			errs := issueStrings(t, err)
			if !slices.Equal(errs, tc.errs) {
				t.Fatalf("issues:\n%s\nwant:\n%s", strings.Join(errs, "\n"), strings.Join(tc.errs, "\n"))
			}
			if err == nil {
				var names []string
				for _, r := range cfg.Rules {
					names = append(names, r.Name)
				}
				slices.Sort(names)
				if !slices.Equal(names, tc.rules) {
					t.Errorf("rules %v, want %v", names, tc.rules)
				}
			}
			entries, _ := os.ReadDir(filepath.Join(filepath.Dir(path), "rules.d"))
			if len(entries) != 1 || entries[0].Name() != "web.toml" {
				t.Errorf("rules.d changed: %v", entries)
			}
		})
	}
}
