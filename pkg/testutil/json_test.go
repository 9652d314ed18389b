package testutil

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSeekJSONArray(t *testing.T) {
	for _, tc := range []struct {
		name, in, key string
		first         int    // the first element, when found
		err           string // the error's text, when not
	}{
		{"first member", `{"rules": [1, 2]}`, "rules", 1, ""},
		{"after others", `{"a": {"rules": [9]}, "b": [7], "rules": [3]}`, "rules", 3, ""},
		{"missing", `{"a": 1}`, "rules", 0, "no rules"},
		{"not an array", `{"rules": {"x": 1}}`, "rules", 0, "rules: want an array"},
		{"not an object", `[1]`, "rules", 0, "want an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec := json.NewDecoder(strings.NewReader(tc.in))
			err := SeekJSONArray(dec, tc.key)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var first int
			if err := dec.Decode(&first); err != nil || first != tc.first {
				t.Errorf("first element %d (%v), want %d", first, err, tc.first)
			}
		})
	}
}
