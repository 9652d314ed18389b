package config

import (
	"strconv"
	"strings"
	"sync"
)

// keyLines maps every key path of a TOML document to the 1-based line where
// it is written. BurntSushi/toml records key positions internally but does
// not export them (MetaData has no position accessor in v1.6.0; only
// ParseError carries a Position), and it does not tell [[group]] elements
// apart, so this small scanner reads the text again.
//
// Paths use the form of the error messages: dotted keys, array-of-tables and
// array elements with a 0-based index, non-bare keys quoted:
//
//	failover.ratio   group[1].backends[0]   zonal_affinity.clients."zone-a"
//
// The scanner assumes the document already parsed (it is only run on text
// that toml.Decode accepted) and never fails; at worst a path is missing and
// the caller falls back to the nearest ancestor's line.
type keyLines map[string]int

// lazyLines are a document's keyLines, scanned the first time a message
// needs a line: a clean file never pays the scan, and a Loader keeps its
// text rather than an entry for every key and array element (10 MB at
// 1000 rule files of 100 backends). A nil *lazyLines knows no line.
type lazyLines struct {
	once  sync.Once
	text  string
	lines keyLines
}

func newLazyLines(text string) *lazyLines { return &lazyLines{text: text} }

// line is keyLines.line, scanning the text on first use.
func (l *lazyLines) line(path string) int {
	if l == nil {
		return 0
	}
	l.once.Do(func() {
		l.lines = scanKeyLines(l.text)
		l.text = ""
	})
	return l.lines.line(path)
}

// line returns the line of path or of its nearest recorded ancestor, and 0
// when neither is known.
func (kl keyLines) line(path string) int {
	for path != "" {
		if n, ok := kl[path]; ok {
			return n
		}
		path = parentPath(path)
	}
	return 0
}

// parentPath strips the last segment ("a.b[2]" → "a.b", "a.b" → "a").
func parentPath(path string) string {
	inQuote := false
	cut := 0
	for i := 0; i < len(path); i++ {
		switch c := path[i]; {
		case c == '"':
			inQuote = !inQuote
		case c == '\\' && inQuote:
			i++
		case (c == '.' || c == '[') && !inQuote:
			cut = i
		}
	}
	return path[:cut]
}

// joinKey appends one key segment to a path, quoting it unless it is bare.
func joinKey(path, seg string) string {
	if !isBareKey(seg) {
		seg = strconv.Quote(seg)
	}
	if path == "" {
		return seg
	}
	return path + "." + seg
}

// joinIndex appends an array index to a path.
func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

func isBareKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

type lineScanner struct {
	s      string
	i      int
	line   int
	out    keyLines
	arrays map[string]int // array-of-tables path → number of elements seen
}

func scanKeyLines(text string) keyLines {
	sc := &lineScanner{s: text, line: 1, out: keyLines{}, arrays: map[string]int{}}
	sc.document()
	return sc.out
}

func (sc *lineScanner) record(path string, line int) {
	if _, ok := sc.out[path]; !ok {
		sc.out[path] = line
	}
}

func (sc *lineScanner) eof() bool { return sc.i >= len(sc.s) }

func (sc *lineScanner) peek() byte {
	if sc.eof() {
		return 0
	}
	return sc.s[sc.i]
}

func (sc *lineScanner) advance() {
	if sc.s[sc.i] == '\n' {
		sc.line++
	}
	sc.i++
}

func (sc *lineScanner) skipSpace() {
	for !sc.eof() && (sc.peek() == ' ' || sc.peek() == '\t') {
		sc.i++
	}
}

// skipSpaceLines skips blanks, newlines and comments (inside arrays).
func (sc *lineScanner) skipSpaceLines() {
	for !sc.eof() {
		switch sc.peek() {
		case ' ', '\t', '\r', '\n':
			sc.advance()
		case '#':
			sc.skipLine()
		default:
			return
		}
	}
}

// skipLine moves to the next newline (not past it).
func (sc *lineScanner) skipLine() {
	for !sc.eof() && sc.peek() != '\n' {
		sc.i++
	}
}

func (sc *lineScanner) document() {
	table := ""
	for {
		sc.skipSpaceLines()
		if sc.eof() {
			return
		}
		line := sc.line
		if sc.peek() == '[' {
			sc.i++
			isArray := sc.peek() == '['
			if isArray {
				sc.i++
			}
			segs := sc.keySegments()
			table = sc.resolveHeader(segs, isArray, line)
			sc.skipLine()
			continue
		}
		segs := sc.keySegments()
		if len(segs) == 0 { // not a key: skip the line rather than loop
			sc.skipLine()
			continue
		}
		sc.keyValue(table, segs, line)
		sc.skipLine()
	}
}

// resolveHeader turns a table header into a path, giving array-of-tables
// segments the index of their current (last) element.
func (sc *lineScanner) resolveHeader(segs []string, isArray bool, line int) string {
	path := ""
	for k, seg := range segs {
		path = joinKey(path, seg)
		last := k == len(segs)-1
		if last && isArray {
			n := sc.arrays[path]
			sc.arrays[path] = n + 1
			sc.record(path, line)
			path = joinIndex(path, n)
		} else if n, ok := sc.arrays[path]; ok && n > 0 {
			path = joinIndex(path, n-1)
		}
		sc.record(path, line)
	}
	return path
}

// keySegments reads a dotted key (bare or quoted segments).
func (sc *lineScanner) keySegments() []string {
	var segs []string
	for {
		sc.skipSpace()
		switch c := sc.peek(); {
		case c == '"':
			segs = append(segs, sc.basicString())
		case c == '\'':
			segs = append(segs, sc.literalString())
		default:
			start := sc.i
			for !sc.eof() && isBareKey(sc.s[sc.i:sc.i+1]) {
				sc.i++
			}
			if sc.i == start {
				return segs
			}
			segs = append(segs, sc.s[start:sc.i])
		}
		sc.skipSpace()
		if sc.peek() != '.' {
			return segs
		}
		sc.i++
	}
}

// basicString reads "..." and returns its unescaped value (best effort).
func (sc *lineScanner) basicString() string {
	start := sc.i
	sc.i++
	for !sc.eof() && sc.peek() != '"' && sc.peek() != '\n' {
		if sc.peek() == '\\' {
			sc.i++
		}
		if !sc.eof() {
			sc.i++
		}
	}
	if !sc.eof() && sc.peek() == '"' {
		sc.i++
	}
	raw := sc.s[start:sc.i]
	if v, err := strconv.Unquote(raw); err == nil {
		return v
	}
	return strings.Trim(raw, `"`)
}

func (sc *lineScanner) literalString() string {
	sc.i++
	start := sc.i
	for !sc.eof() && sc.peek() != '\'' && sc.peek() != '\n' {
		sc.i++
	}
	v := sc.s[start:sc.i]
	if !sc.eof() && sc.peek() == '\'' {
		sc.i++
	}
	return v
}

// multiline skips a """ or ”' string, counting its newlines.
func (sc *lineScanner) multiline(delim string) {
	sc.i += 3
	for !sc.eof() {
		if delim == `"""` && sc.peek() == '\\' {
			sc.advance()
			if !sc.eof() {
				sc.advance()
			}
			continue
		}
		if strings.HasPrefix(sc.s[sc.i:], delim) {
			sc.i += 3
			// A closing delimiter may be followed by up to two more quotes.
			for k := 0; k < 2 && !sc.eof() && sc.peek() == delim[0]; k++ {
				sc.i++
			}
			return
		}
		sc.advance()
	}
}

// keyValue records the key path segs below base at line, every prefix
// included (a.b.c = 1 also makes a and a.b), then reads the '=' and the
// value, recording the keys of inline tables in it.
func (sc *lineScanner) keyValue(base string, segs []string, line int) {
	path := base
	for _, seg := range segs {
		path = joinKey(path, seg)
		sc.record(path, line)
	}
	sc.skipSpace()
	if sc.peek() == '=' {
		sc.i++
	}
	sc.skipSpace()
	sc.value(path)
}

// value skips one value, recording the lines of array elements and inline
// table keys under path.
func (sc *lineScanner) value(path string) {
	switch {
	case strings.HasPrefix(sc.s[sc.i:], `"""`):
		sc.multiline(`"""`)
	case strings.HasPrefix(sc.s[sc.i:], `'''`):
		sc.multiline(`'''`)
	case sc.peek() == '"':
		sc.basicString()
	case sc.peek() == '\'':
		sc.literalString()
	case sc.peek() == '[':
		sc.i++
		for n := 0; ; n++ {
			sc.skipSpaceLines()
			if sc.eof() {
				return
			}
			if sc.peek() == ']' {
				sc.i++
				return
			}
			elem := joinIndex(path, n)
			sc.record(elem, sc.line)
			start := sc.i
			sc.value(elem)
			if sc.i == start { // not a value (invalid TOML): make progress
				sc.i++
			}
			sc.skipSpaceLines()
			if sc.peek() == ',' {
				sc.i++
			}
		}
	case sc.peek() == '{':
		sc.i++
		for {
			sc.skipSpace()
			if sc.eof() || sc.peek() == '\n' {
				return
			}
			if sc.peek() == '}' {
				sc.i++
				return
			}
			line := sc.line
			segs := sc.keySegments()
			if len(segs) == 0 {
				sc.i++ // unexpected byte: make progress
				continue
			}
			sc.keyValue(path, segs, line)
			sc.skipSpace()
			if sc.peek() == ',' {
				sc.i++
			}
		}
	default: // number, bool, date: up to a delimiter
		for !sc.eof() {
			switch sc.peek() {
			case ',', ']', '}', '\n', '#':
				return
			}
			sc.i++
		}
	}
}
