package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/testutil"
)

// streamAPI answers Status and Backends with n rules yielded one by one;
// before it yields rule i it waits (up to 5 s, once) until the client has
// read rule i-ahead, which only a reply written as it is produced allows.
type streamAPI struct {
	fakeAPI
	n, ahead int
	// read is poked after each rule the client decodes, and progress holds
	// the index of the last one: pokes coalesce (the channel holds one),
	// the index does not get lost with them.
	read     chan struct{}
	progress atomic.Int64
	waited   bool // a wait timed out
}

func streamRule(i int) *Rule {
	return &Rule{Name: fmt.Sprintf("r%04d", i), VIP: "203.0.113.10", Tier: "PRIMARY <&>", Backends: []Backend{
		{Rule: fmt.Sprintf("r%04d", i), Address: "192.0.2.1", Health: "HEALTHY"}, {Rule: fmt.Sprintf("r%04d", i), Address: "192.0.2.2"}}}
}

func (s *streamAPI) rules(emit func(*Rule) error) error {
	seen := -1
	for i := range s.n {
		for s.read != nil && !s.waited && seen < i-s.ahead {
			select {
			case <-s.read:
				seen = int(s.progress.Load())
			case <-time.After(5 * time.Second):
				s.waited = true // go on without waiting: the test fails on waited
			}
		}
		if err := emit(streamRule(i)); err != nil {
			return err
		}
	}
	return nil
}

func (s *streamAPI) Status(ctx context.Context, q StatusQuery) (*Status, error) {
	return &Status{Config: "/etc/xlb/xlb.toml", Queues: []int{0, 1}, RulesSelected: s.n, Events: []RuleEvent{{Rule: "r0001", Kind: "tier-switch"}}, Stream: s.rules}, nil
}

func (s *streamAPI) Backends(ctx context.Context, q StatusQuery) (RuleStream, error) {
	return s.rules, nil
}

// TestStreamedReplies: a streamed status or backend list is byte for
// byte the whole answer encoded at once, and reaches the client while it
// is produced: the daemon yields rule i only after the client decoded
// rule i-200 (a reply built whole first would make it wait in vain).
func TestStreamedReplies(t *testing.T) {
	api := &streamAPI{n: 1000, ahead: 200}
	_, c := serve(t, api)
	ctx := context.Background()

	// Whole: the same bytes as before streaming.
	whole := &Status{Config: "/etc/xlb/xlb.toml", Queues: []int{0, 1}, RulesSelected: api.n, Events: []RuleEvent{{Rule: "r0001", Kind: "tier-switch"}}}
	var backends []Backend
	for i := range api.n {
		whole.Rules = append(whole.Rules, *streamRule(i))
		backends = append(backends, streamRule(i).Backends...)
	}
	for _, tc := range []struct {
		name string
		open func() (io.ReadCloser, error)
		want any
	}{
		{"status", func() (io.ReadCloser, error) { return c.StatusReply(ctx, StatusQuery{}) }, whole},
		{"backends", func() (io.ReadCloser, error) { return c.BackendsReply(ctx, StatusQuery{}) }, backends},
	} {
		var want bytes.Buffer
		json.NewEncoder(&want).Encode(tc.want)
		body, err := tc.open()
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(body)
		body.Close()
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s: streamed reply (%d bytes, %v) differs from the whole answer (%d bytes)", tc.name, len(got), err, want.Len())
		}
	}
	st, err := c.Status(ctx, StatusQuery{})
	if err != nil || len(st.Rules) != api.n || st.Rules[999].Name != "r0999" || len(st.Events) != 1 {
		t.Fatalf("Client.Status of a streamed reply: %d rules, %v", len(st.Rules), err)
	}

	// In order, while produced.
	api.progress.Store(-1)
	api.read = make(chan struct{}, 1)
	body, err := c.StatusReply(ctx, StatusQuery{})
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	dec := json.NewDecoder(body)
	if err := testutil.SeekJSONArray(dec, "rules"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; dec.More(); i++ {
		var r Rule
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("r%04d", i); r.Name != want {
			t.Fatalf("rule %d is %s, want %s", i, r.Name, want)
		}
		api.progress.Store(int64(i))
		select {
		case api.read <- struct{}{}:
		default:
		}
	}
	if api.waited {
		t.Errorf("the daemon waited for the client to read rules it had not received: the reply is not written as it is produced")
	}
	t.Logf("1000 rules decoded as they came in %v", time.Since(start).Round(time.Millisecond))
}

// tricky are strings encoding/json escapes or formats in its own way:
// HTML characters, quotes, control characters, U+2028, invalid UTF-8,
// and addresses of both families.
var tricky = []string{"<a href=\"x\">&amp;</a>", "back\\slash\ttab\nline\x01\x1f\b\f\r\x7f", "\u2028\u2029 é ☃ 😀", "bad \xff\xfe utf-8",
	"2001:db8::1", "fd00:0:0:1::ff", "198.18.0.1", ""}

// fillValue sets every field of v, recursively, to a value derived from
// *seed (each use advances it): strings from tricky, numbers of every
// sign and magnitude encoding/json formats differently, times with
// nanoseconds and zones, slices of two or three elements. A field added
// to a type is filled without changing this function.
func fillValue(v reflect.Value, seed *int) {
	*seed++
	s := *seed
	switch v.Kind() {
	case reflect.String:
		v.SetString(tricky[s%len(tricky)])
	case reflect.Bool:
		v.SetBool(s%3 != 0)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt([]int64{-1, 0, 7, 1 << 40, -123456789}[s%5])
	case reflect.Uint, reflect.Uint64, reflect.Uint32, reflect.Uint16, reflect.Uint8:
		v.SetUint([]uint64{0, 1, 4294967295, 1 << 50}[s%4] & (1<<(8*v.Type().Size()) - 1))
	case reflect.Float64, reflect.Float32:
		v.SetFloat([]float64{0, 0.1, 1e21, 1e-7, 123456789.125, -0.5, 3e-300}[s%7])
	case reflect.Pointer:
		if s%4 == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		fillValue(p.Elem(), seed)
		v.Set(p)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			zone := time.FixedZone("x", []int{0, 3600, -5*3600 - 1800}[s%3])
			v.Set(reflect.ValueOf(time.Date(2026, 12, 2, 7, 50, s%60, []int{0, 1, 123456789, 500000000}[s%4], zone)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillValue(v.Field(i), seed)
			}
		}
	case reflect.Slice:
		n := 2 + s%2
		sl := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fillValue(sl.Index(i), seed)
		}
		v.Set(sl)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillValue(k, seed)
		fillValue(e, seed)
		m.SetMapIndex(k, e)
		v.Set(m)
	}
}

// TestStreamedBytesAsEncodingJSON: a streamed status and backend list are
// byte for byte encoding/json's encoding of the same values, for rules
// and backends with every field set (each seed sets them differently),
// with zero values, and with strings it escapes.
func TestStreamedBytesAsEncodingJSON(t *testing.T) {
	var rules []Rule
	rules = append(rules, Rule{}, Rule{Backends: []Backend{}}, Rule{Backends: []Backend{{}}})
	for seed := range 40 {
		var r Rule
		fillValue(reflect.ValueOf(&r).Elem(), &seed)
		r.Backends = append(r.Backends, Backend{}) // a zero row among filled ones
		rules = append(rules, r)
	}
	stream := func(emit func(*Rule) error) error {
		for i := range rules {
			// The emitted rule is the stream's: overwritten after emit.
			r := rules[i].Clone()
			if err := emit(&r); err != nil {
				return err
			}
			fillValue(reflect.ValueOf(&r).Elem(), &i)
		}
		return nil
	}
	var head Status
	seed := 1000
	fillValue(reflect.ValueOf(&head).Elem(), &seed)
	head.Stream = stream
	whole := head
	whole.Stream, whole.Rules = nil, rules
	var backends []Backend
	for _, r := range rules {
		backends = append(backends, r.Backends...)
	}
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter)
		want  any
	}{
		{"status", func(w http.ResponseWriter) { writeStatus(w, &head, nil) }, &whole},
		{"backends", func(w http.ResponseWriter) { writeBackends(w, stream, nil) }, backends},
	} {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(tc.want); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		tc.write(rec)
		if got := rec.Body.Bytes(); !bytes.Equal(got, want.Bytes()) {
			i := 0
			for i < min(len(got), want.Len()) && got[i] == want.Bytes()[i] {
				i++
			}
			t.Errorf("%s: streamed %d bytes, encoding/json %d; first difference at %d: %q against %q", tc.name, len(got), want.Len(), i,
				got[max(0, i-40):min(len(got), i+40)], want.Bytes()[max(0, i-40):min(want.Len(), i+40)])
		}
	}
}

// TestNotFiniteRefused: a number JSON cannot hold fails a backend's
// encoding, as it fails encoding/json's (the answer is cut, not wrong).
func TestNotFiniteRefused(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for _, b := range []Backend{{Share: f}, {PacketsPerSec: f}, {Traffic: Traffic{BytesPerSec: f}}, {CheckInfo: CheckInfo{ProbeLatencySeconds: f}}} {
			_, jerr := json.Marshal(&b)
			_, err := appendBackend(nil, &b)
			if jerr == nil || err == nil {
				t.Errorf("%v: encoding/json %v, appendBackend %v; want both to fail", f, jerr, err)
			}
		}
	}
}

// TestRuleClone: a clone shares no memory with its rule: changing every
// field of the rule, through its pointers and slices, leaves the clone's
// encoding as it was.
func TestRuleClone(t *testing.T) {
	for seed := range 20 {
		var r Rule
		fillValue(reflect.ValueOf(&r).Elem(), &seed)
		c := r.Clone()
		before, _ := json.Marshal(&c)
		if orig, _ := json.Marshal(&r); !bytes.Equal(before, orig) {
			t.Fatalf("seed %d: the clone differs from its rule", seed)
		}
		// Overwrite what r points to, in place.
		for i := range r.Backends {
			b := &r.Backends[i]
			rv := reflect.ValueOf(b).Elem()
			for j := range rv.NumField() {
				if f := rv.Field(j); f.Kind() == reflect.Pointer && !f.IsNil() {
					s := seed + 1
					fillValue(f.Elem(), &s)
				}
			}
			for _, p := range []*time.Time{b.LastCheck, b.HealthSince} {
				if p != nil {
					*p = p.Add(time.Hour)
				}
			}
			*b = Backend{Rule: "overwritten"}
		}
		if after, _ := json.Marshal(&c); !bytes.Equal(before, after) {
			t.Errorf("seed %d: the clone changed with its rule", seed)
		}
	}
}

// BenchmarkRowEncoding is a backend row of a streamed answer, as health
// checks leave it (two times set), encoded by rowWriter against
// encoding/json's Encoder of the same row into the same writer (the
// reference: what a stream wrote with before).
func BenchmarkRowEncoding(b *testing.B) {
	at := time.Date(2026, 12, 2, 8, 40, 1, 123456789, time.UTC)
	rows := make([]Backend, 100)
	for i := range rows {
		rows[i] = Backend{Rule: "r00042", Address: fmt.Sprintf("198.19.%d.%d", i/250, 1+i%250), Group: "g", Role: "primary", RoleSource: "config",
			Admin: "IN_SERVICE", AdminSource: "config", Health: "HEALTHY", WeightConfigured: -1, WeightSource: "config", WeightEffective: 1,
			Share: 0.0100059, Eligible: true, Tier: "PRIMARY", Usable: true, Slot: uint32(i), Packets: 123456, PacketsPerSec: 10.5,
			Traffic:   Traffic{Bytes: 98765432, BytesPerSec: 1234.25, NewConnections: 77, NewConnectionsPerSec: 0.5},
			CheckInfo: CheckInfo{LastCheck: &at, ProbeLatencySeconds: 0.000213, HealthSince: &at, HealthChanges: 1}}
	}
	for _, tc := range []struct {
		name  string
		write func(w io.Writer) func(*Backend) error
	}{
		{"rowWriter", func(w io.Writer) func(*Backend) error {
			rw := &rowWriter{w: w}
			return func(r *Backend) error { return rw.write(r) }
		}},
		{"encoding-json", func(w io.Writer) func(*Backend) error {
			enc := json.NewEncoder(w)
			return func(r *Backend) error { return enc.Encode(r) }
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			write := tc.write(io.Discard)
			b.ReportAllocs()
			for b.Loop() {
				for i := range rows {
					if err := write(&rows[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
		})
	}
}
