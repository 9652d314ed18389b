package config

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// srcFile is one TOML file being read: its display name, key lines and the
// shared issue list.
type srcFile struct {
	name  string
	lines *lazyLines
	is    *issues
	asked map[string]bool // when not nil, every key name a getter asked for (tests)
	// placeholders are lines whose out-of-range integer decodeFile
	// reported and replaced by 0: the getters' errors there are left out.
	placeholders map[int]bool
}

func (f *srcFile) errorf(path, format string, args ...any) {
	line := f.lines.line(path)
	if f.placeholders[line] && line > 0 {
		return
	}
	f.is.errorf(f.name, line, path, format, args...)
}

func (f *srcFile) warnf(path, format string, args ...any) {
	f.is.warnf(f.name, f.lines.line(path), path, format, args...)
}

// table walks one decoded TOML table. Every getter marks its key as known;
// done reports the keys nobody asked for as unknown. Getters leave the
// destination (holding the default) alone when the key is absent or wrong,
// and record an error when it is wrong, so one pass finds every problem.
type table struct {
	f       *srcFile
	path    string
	m       map[string]any
	known   []string
	present bool // the table is written in the file
}

func newTable(f *srcFile, path string, m map[string]any) *table {
	return &table{f: f, path: path, m: m, present: m != nil}
}

func (t *table) key(k string) string { return joinKey(t.path, k) }

func (t *table) errorf(k, format string, args ...any) { t.f.errorf(t.key(k), format, args...) }

func (t *table) warnf(k, format string, args ...any) { t.f.warnf(t.key(k), format, args...) }

// get marks k known and returns its raw value.
func (t *table) get(k string) (any, bool) {
	t.known = append(t.known, k)
	if t.f.asked != nil {
		t.f.asked[k] = true
	}
	v, ok := t.m[k]
	return v, ok
}

// has reports whether k is written, without marking it known.
func (t *table) has(k string) bool {
	_, ok := t.m[k]
	return ok
}

// rejected marks k known and reports it, when written, as a key xlb does
// not offer, with why: a key an operator may bring from the seeds gets a
// reason instead of "unknown key".
func (t *table) rejected(k, why string) {
	if _, ok := t.get(k); ok {
		t.errorf(k, "not supported: %s", why)
	}
}

// typeName names a decoded TOML value's type for messages.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case []map[string]any:
		return "an array of tables"
	case map[string]any:
		return "a table"
	default:
		return "a date/time"
	}
}

func (t *table) wrongType(k, want string, v any) {
	t.errorf(k, "want %s, got %s", want, typeName(v))
}

// typed reads key k as a T; a value of another type is reported as
// wanting want ("a string").
func typed[T any](t *table, k, want string) (T, bool) {
	var x T
	v, ok := t.get(k)
	if !ok {
		return x, false
	}
	x, ok = v.(T)
	if !ok {
		t.wrongType(k, want, v)
	}
	return x, ok
}

func (t *table) str(k string, dst *string) bool {
	s, ok := typed[string](t, k, "a string")
	if ok {
		*dst = s
	}
	return ok
}

func (t *table) boolean(k string, dst *bool) bool {
	b, ok := typed[bool](t, k, "a boolean (true or false)")
	if ok {
		*dst = b
	}
	return ok
}

// integer reads an integer within [lo, hi].
func (t *table) integer(k string, lo, hi int64, dst *int64) bool {
	n, ok := typed[int64](t, k, "an integer")
	if !ok {
		return false
	}
	if n < lo || n > hi {
		t.errorf(k, "%d is outside [%d, %d]", n, lo, hi)
		return false
	}
	*dst = n
	return true
}

func (t *table) intField(k string, lo, hi int64, dst *int) bool {
	var n int64
	if !t.integer(k, lo, hi, &n) {
		return false
	}
	*dst = int(n)
	return true
}

func (t *table) port(k string, dst *uint16) bool {
	var n int64
	if !t.integer(k, 1, 65535, &n) {
		return false
	}
	*dst = uint16(n)
	return true
}

// ratio reads a number in [0, 1] (integers 0 and 1 are accepted).
func (t *table) ratio(k string, dst *float64) bool {
	v, ok := t.get(k)
	if !ok {
		return false
	}
	var x float64
	switch n := v.(type) {
	case float64:
		x = n
	case int64:
		x = float64(n)
	default:
		t.wrongType(k, "a number", v)
		return false
	}
	if math.IsNaN(x) || x < 0 || x > 1 {
		t.errorf(k, "%s is outside [0, 1]", fmtFloat(x))
		return false
	}
	*dst = x
	return true
}

func fmtFloat(x float64) string { return fmt.Sprintf("%g", x) }

// duration reads a Go duration string ("60s", "10m") within [lo, hi].
func (t *table) duration(k string, lo, hi time.Duration, dst *time.Duration) bool {
	var s string
	if !t.str(k, &s) {
		return false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.errorf(k, "%q is not a duration (write a number with a unit, like \"60s\" or \"10m\")", s)
		return false
	}
	if d < lo || d > hi {
		t.errorf(k, "%s is outside [%s, %s]", s, fmtDuration(lo), fmtDuration(hi))
		return false
	}
	*dst = d
	return true
}

// fmtDuration prints whole seconds as "3600s", the unit the docs use.
func fmtDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// enum reads one of names into dst.
func enum[E ~uint8](t *table, k string, names []string, dst *E) bool {
	var s string
	if !t.str(k, &s) {
		return false
	}
	v, ok := parseEnum[E](names, s)
	if !ok {
		t.errorf(k, "%q %s", s, enumHint(names, s))
		return false
	}
	*dst = v
	return true
}

// sub returns the sub-table k; an absent one reads as empty.
func (t *table) sub(k string) *table {
	v, ok := t.get(k)
	path := t.key(k)
	if !ok {
		return newTable(t.f, path, nil)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.wrongType(k, "a table", v)
		return newTable(t.f, path, nil)
	}
	return newTable(t.f, path, m)
}

// tables returns the elements of the array of tables k ([[k]]).
func (t *table) tables(k string) []*table {
	v, ok := t.get(k)
	if !ok {
		return nil
	}
	var ms []map[string]any
	switch a := v.(type) {
	case []map[string]any:
		ms = a
	case []any: // k = [{...}, {...}]
		for i, e := range a {
			m, ok := e.(map[string]any)
			if !ok {
				t.f.errorf(joinIndex(t.key(k), i), "want a table, got %s", typeName(e))
				continue
			}
			ms = append(ms, m)
		}
	default:
		t.wrongType(k, "an array of tables ([["+k+"]])", v)
		return nil
	}
	out := make([]*table, len(ms))
	for i, m := range ms {
		out[i] = newTable(t.f, joinIndex(t.key(k), i), m)
	}
	return out
}

// done reports every key of the table that no getter asked for.
func (t *table) done() {
	var unknown []string
	for k := range t.m {
		if !slices.Contains(t.known, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		if s := suggest(k, t.known); s != "" {
			t.errorf(k, "unknown key (did you mean %s?)", s)
		} else {
			t.errorf(k, "unknown key")
		}
	}
}

// suggest returns the known key closest to k (case-insensitive equal or
// at most two edits away), or "".
func suggest(k string, known []string) string {
	best, bestD := "", 3
	for _, c := range known {
		if strings.EqualFold(c, k) {
			return c
		}
		if d := editDistance(strings.ToLower(k), c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
