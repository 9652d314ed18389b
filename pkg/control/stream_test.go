package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	read     chan int // the client's progress: the index of each rule it decoded
	waited   bool     // a wait timed out
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
			case seen = <-s.read:
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
	api.read = make(chan int, 1)
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
		select {
		case api.read <- i:
		default:
		}
	}
	if api.waited {
		t.Errorf("the daemon waited for the client to read rules it had not received: the reply is not written as it is produced")
	}
	t.Logf("1000 rules decoded as they came in %v", time.Since(start).Round(time.Millisecond))
}
