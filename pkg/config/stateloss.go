package config

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// StateFileError is a state file that cannot be loaded: its file:line:
// key: errors (Err) and what removing the file would drop (Loss), read
// line by line from whatever of it reads, so that the operator can choose
// between fixing the file and removing it.
type StateFileError struct {
	Path string
	Err  *Error
	Loss string // e.g. "2 override(s) (web 10.0.1.10: drained; web 10.0.1.11: role failover)"
}

func (e *StateFileError) Error() string {
	return fmt.Sprintf("%v\nstate file %s rejected: fix it, or remove it and lose %s", e.Err, e.Path, e.Loss)
}

func (e *StateFileError) Unwrap() error { return e.Err }

var (
	stateTable = regexp.MustCompile(`^\s*\[\[?\s*([A-Za-z0-9_.-]+)\s*\]?\]\s*(?:#.*)?$`)
	stateKey   = regexp.MustCompile(`^\s*([A-Za-z0-9_-]+)\s*=\s*("[^"]*"|'[^']*'|true|false|[0-9]+)`)
)

// stateLoss describes what the state file at path holds, from the lines
// that read as `key = value` inside [[override]] and [appliance], even when
// the file as a whole does not parse.
func stateLoss(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "nothing it still holds (it cannot be read)"
	}
	var overrides []map[string]string
	appliance := map[string]string{}
	var cur map[string]string
	for _, line := range strings.Split(string(data), "\n") {
		if m := stateTable.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "override":
				cur = map[string]string{}
				overrides = append(overrides, cur)
			case "appliance":
				cur = appliance
			default:
				cur = nil
			}
			continue
		}
		if m := stateKey.FindStringSubmatch(line); m != nil && cur != nil {
			cur[m[1]] = strings.Trim(m[2], `"'`)
		}
	}
	var parts []string
	for _, o := range overrides {
		var what []string
		if o["drained"] == "true" {
			what = append(what, "drained")
		}
		if r := o["role"]; r != "" {
			what = append(what, "role "+r)
		}
		if w := o["weight"]; w != "" {
			what = append(what, "weight "+w)
		}
		if len(what) == 0 {
			what = append(what, "no change that reads")
		}
		parts = append(parts, fmt.Sprintf("%s %s: %s", orQ(o["rule"]), orQ(o["backend"]), strings.Join(what, ", ")))
	}
	var out []string
	if len(overrides) > 0 {
		out = append(out, fmt.Sprintf("%d CLI override(s) (%s)", len(overrides), strings.Join(parts, "; ")))
	}
	if appliance["drained"] == "true" {
		out = append(out, "the appliance drain (xlb appliance drain: its VIPs would be announced again)")
	}
	if len(out) == 0 {
		return "nothing that reads as an override or an appliance drain"
	}
	return strings.Join(out, " and ")
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
