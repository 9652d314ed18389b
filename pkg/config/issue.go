package config

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Issue is one finding about a configuration file, located by file, line and
// key. It prints as
//
//	rules.d/web.toml:14: failover.ratio: 1.5 is outside [0, 1]
//
// File is the path relative to the configuration directory (absolute when
// the file lies outside it). Line is 0 when the key is not written in the
// file (a missing required key, a default that does not fit) and is then
// left out; Key is empty for file-level findings (syntax errors, unreadable
// files) and is then left out too.
type Issue struct {
	File    string
	Line    int
	Key     string
	Message string
}

func (i Issue) String() string {
	var b strings.Builder
	b.WriteString(i.File)
	if i.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(i.Line))
	}
	b.WriteString(": ")
	if i.Key != "" {
		b.WriteString(i.Key)
		b.WriteString(": ")
	}
	b.WriteString(i.Message)
	return b.String()
}

// Warning is an Issue that does not reject the configuration (for example a
// UDP rule that is not fragment-safe).
type Warning struct{ Issue }

// Error is a rejected configuration: every problem found, sorted by file
// (xlb.toml first, then the rule files in name order), line and key.
type Error struct {
	Issues []Issue
}

func (e *Error) Error() string {
	var b strings.Builder
	if len(e.Issues) > 1 {
		fmt.Fprintf(&b, "%d configuration errors:\n", len(e.Issues))
	}
	for k, i := range e.Issues {
		if k > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(i.String())
	}
	return b.String()
}

// issues collects findings in order of discovery; fileRank orders files.
type issues struct {
	errs     []Issue
	warns    []Issue
	fileRank map[string]int
	// ruleRank places a rule file among the rule files, which come after
	// the first file ranked (xlb.toml) and before the others (the loader
	// knows their order without ranking each).
	ruleRank func(file string) (int, bool)
}

func (is *issues) rank(file string) {
	if is.fileRank == nil {
		is.fileRank = map[string]int{}
	}
	if _, ok := is.fileRank[file]; !ok {
		is.fileRank[file] = len(is.fileRank)
	}
}

func (is *issues) errorf(file string, line int, key, format string, args ...any) {
	is.rank(file)
	is.errs = append(is.errs, Issue{File: file, Line: line, Key: key, Message: fmt.Sprintf(format, args...)})
}

func (is *issues) warnf(file string, line int, key, format string, args ...any) {
	is.rank(file)
	is.warns = append(is.warns, Issue{File: file, Line: line, Key: key, Message: fmt.Sprintf(format, args...)})
}

func (is *issues) sort(list []Issue) {
	slices.SortStableFunc(list, func(a, b Issue) int {
		ga, ra := is.key(a.File)
		gb, rb := is.key(b.File)
		return cmp.Or(
			cmp.Compare(ga, gb),
			cmp.Compare(ra, rb),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Key, b.Key),
		)
	})
}

// key orders files: xlb.toml (ranked first), the rule files, then the
// others in the order they were ranked.
func (is *issues) key(file string) (group, rank int) {
	if is.ruleRank != nil {
		if i, ok := is.ruleRank(file); ok {
			return 1, i
		}
	}
	if r := is.fileRank[file]; r > 0 {
		return 2, r
	}
	return 0, 0
}

// result returns the sorted warnings and, when there are errors, an *Error.
func (is *issues) result() ([]Warning, error) {
	is.sort(is.warns)
	var ws []Warning
	for _, w := range is.warns {
		ws = append(ws, Warning{w})
	}
	if len(is.errs) == 0 {
		return ws, nil
	}
	is.sort(is.errs)
	return ws, &Error{Issues: is.errs}
}
