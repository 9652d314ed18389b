package control

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// The answers of every rule (status, backend list) are written as they
// are produced: the daemon yields one rule at a time (RuleStream) and
// the handler encodes and writes it, so neither side holds the whole
// answer (docs/design.md#read-commands-at-scale). The bytes are those of
// the whole answer encoded at once, so a client decodes either alike.

// rulesNull is where the rules go in a Status encoded without them.
var rulesNull = []byte(`"rules":null`)

// writeStatus writes st, streaming its rules when st.Stream is set.
func writeStatus(w http.ResponseWriter, st *Status, err error) {
	if err != nil || st.Stream == nil {
		writeReply(w, st, err)
		return
	}
	head := *st
	head.Rules, head.Stream = nil, nil
	b, err := json.Marshal(&head)
	if err != nil {
		writeError(w, Errorf(http.StatusInternalServerError, "encode reply: %v", err))
		return
	}
	// Field names are never inside a JSON string unescaped, and no field
	// before rules has one of that name: the first is the top level's.
	i := bytes.Index(b, rulesNull)
	if i < 0 {
		writeError(w, Errorf(http.StatusInternalServerError, "encode reply: no rules field"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b[:i+len(`"rules":`)])
	streamArray(w, st.Stream, func(r *Rule, emit func(any) error) error { return emit(r) })
	w.Write(b[i+len(rulesNull):])
	w.Write([]byte{'\n'})
}

// writeBackends writes the backends of the rules rules yields as one
// JSON array.
func writeBackends(w http.ResponseWriter, rules RuleStream, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	streamArray(w, rules, func(r *Rule, emit func(any) error) error {
		for i := range r.Backends {
			if err := emit(&r.Backends[i]); err != nil {
				return err
			}
		}
		return nil
	})
	w.Write([]byte{'\n'})
}

// streamArray writes a JSON array of the values each rule of rules gives.
// An error once the reply has begun (the client went away, a rule could
// not be read) aborts the connection: the client sees a cut reply, never
// a complete one that lacks rules. One json.Encoder encodes every value
// into its pooled buffer and writes it from there, so a value costs no
// copy of its bytes (json.Marshal returns a new slice for each).
func streamArray(w http.ResponseWriter, rules RuleStream, values func(r *Rule, emit func(any) error) error) {
	w.Write([]byte{'['})
	enc := json.NewEncoder(&elementWriter{w: w})
	emit := func(v any) error { return enc.Encode(v) }
	if err := rules(func(r *Rule) error { return values(r, emit) }); err != nil {
		panic(http.ErrAbortHandler)
	}
	w.Write([]byte{']'})
}

// elementWriter writes what a json.Encoder encodes, one value per Write
// ending in a newline, as the elements of a JSON array: a comma before
// every one but the first, and no newline.
type elementWriter struct {
	w io.Writer
	n int
}

var comma = []byte{','}

func (e *elementWriter) Write(b []byte) (int, error) {
	v := b
	if len(v) > 0 && v[len(v)-1] == '\n' {
		v = v[:len(v)-1]
	}
	if e.n > 0 {
		if _, err := e.w.Write(comma); err != nil {
			return 0, err
		}
	}
	e.n++
	if _, err := e.w.Write(v); err != nil {
		return 0, err
	}
	return len(b), nil
}
