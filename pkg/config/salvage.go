package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// Salvage: what can be read from an xlb.toml that does not parse. During
// an incident a syntax error in xlb.toml must not keep the CLI from its
// daemon (xlb reload, status) nor make validate report errors that are not
// there (a rules_dir it could not read).

// topLevelString matches one top-level `key = "value"` line (a basic
// string without escapes, or a literal string), with a comment after it.
var topLevelString = regexp.MustCompile(`^\s*([A-Za-z0-9_-]+)\s*=\s*(?:"([^"\\]*)"|'([^']*)')\s*(?:#.*)?$`)

// topLevelStrings returns the top-level string keys of TOML text, line by
// line, before the first table header; lines that do not read as such are
// skipped.
func topLevelStrings(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") {
			break
		}
		if m := topLevelString.FindStringSubmatch(line); m != nil {
			if _, dup := out[m[1]]; !dup {
				out[m[1]] = m[2] + m[3]
			}
		}
	}
	return out
}

// ControlSocket returns the control socket the configuration at path
// names: control_socket resolved against the file's directory, or
// DefaultControlSocket. It reads only that key. A file that does not parse
// still gives its control_socket line when that line reads; the syntax
// error then comes back as problem, in validate's file:line: form, and the
// socket is still returned. err is for a file that cannot be read.
func ControlSocket(path string) (socket string, problem *Issue, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", path, err)
	}
	var v struct {
		ControlSocket string `toml:"control_socket"`
	}
	if _, err := toml.Decode(string(data), &v); err != nil {
		is := &Issue{File: filepath.Base(path), Message: err.Error()}
		var pe toml.ParseError
		if errors.As(err, &pe) {
			is.Line, is.Message = pe.Position.Line, pe.Message
		}
		problem = is
		v.ControlSocket = topLevelStrings(string(data))["control_socket"]
	}
	if v.ControlSocket == "" {
		return DefaultControlSocket, problem, nil
	}
	return resolve(filepath.Dir(path), v.ControlSocket), problem, nil
}
