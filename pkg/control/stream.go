package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
// a complete one that lacks rules.
func streamArray(w http.ResponseWriter, rules RuleStream, values func(r *Rule, emit func(any) error) error) {
	w.Write([]byte{'['})
	rw := &rowWriter{w: w}
	emit := rw.write // once: a method value made per rule would be garbage
	if err := rules(func(r *Rule) error { return values(r, emit) }); err != nil {
		panic(http.ErrAbortHandler)
	}
	w.Write([]byte{']'})
}

// rowWriter writes the values of an array, each encoded into one buffer
// reused from value to value: a backend by appendBackend (encode.go), a
// rule by encoding/json without its backends, which appendBackend
// encodes in their place. So an answer of every rule makes no garbage
// per row (docs/design.md#read-commands-at-scale).
type rowWriter struct {
	w    io.Writer
	n    int
	buf  []byte
	head Rule          // the rule being written, without its backends
	hbuf bytes.Buffer  // head encoded
	enc  *json.Encoder // into hbuf
}

// backendsNull is where the backends go in a Rule encoded without them.
var backendsNull = []byte(`"backends":null`)

func (rw *rowWriter) write(v any) error {
	buf := rw.buf[:0]
	if rw.n > 0 {
		buf = append(buf, ',')
	}
	rw.n++
	var err error
	switch v := v.(type) {
	case *Backend:
		buf, err = appendBackend(buf, v)
	case *Rule:
		buf, err = rw.appendRule(buf, v)
	default:
		err = fmt.Errorf("encode reply: no encoder for %T", v)
	}
	rw.buf = buf
	if err != nil {
		return err
	}
	_, err = rw.w.Write(buf)
	return err
}

// appendRule appends r as encoding/json encodes it.
func (rw *rowWriter) appendRule(buf []byte, r *Rule) ([]byte, error) {
	if rw.enc == nil {
		rw.enc = json.NewEncoder(&rw.hbuf)
	}
	rw.head = *r
	rw.head.Backends = nil
	rw.hbuf.Reset()
	if err := rw.enc.Encode(&rw.head); err != nil {
		return buf, err
	}
	head := bytes.TrimSuffix(rw.hbuf.Bytes(), []byte{'\n'})
	// As for rulesNull: no field before backends has one of that name.
	i := bytes.Index(head, backendsNull)
	if i < 0 {
		return buf, errors.New("encode reply: no backends field")
	}
	buf = append(buf, head[:i+len(`"backends":`)]...)
	if r.Backends == nil {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, '[')
		for j := range r.Backends {
			if j > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendBackend(buf, &r.Backends[j]); err != nil {
				return buf, err
			}
		}
		buf = append(buf, ']')
	}
	return append(buf, head[i+len(backendsNull):]...), nil
}
