package health

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xlbnet/xlb/failover"
)

// recorder collects the changes a Checker reports.
type recorder struct {
	mu     sync.Mutex
	events []Status
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) on(s Status) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// waitFor returns the first event of k that satisfies ok, failing the test
// after a few seconds.
func (r *recorder) waitFor(tb testing.TB, k Key, ok func(Status) bool) Status {
	tb.Helper()
	deadline := time.After(5 * time.Second)
	for {
		for _, s := range r.all() {
			if s.Key == k && ok(s) {
				return s
			}
		}
		select {
		case <-r.notify:
		case <-deadline:
			tb.Fatalf("%s: no such change; got %v", k, r.all())
		}
	}
}

func healthIs(h failover.Health) func(Status) bool {
	return func(s Status) bool { return s.Health == h }
}

// backend is an HTTP(S) test server whose answer the test can change;
// answer gets the 1-based request number.
type backend struct {
	*httptest.Server
	requests atomic.Int64
	answer   atomic.Pointer[func(n int64) (int, string)]
}

func newBackend(tb testing.TB, tls bool, answer func(n int64) (int, string)) *backend {
	tb.Helper()
	b := &backend{}
	b.answer.Store(&answer)
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, weight := (*b.answer.Load())(b.requests.Add(1))
		if status == 0 { // hang until the client gives up
			<-r.Context().Done()
			return
		}
		if weight != "" {
			w.Header().Set(WeightHeader, weight)
		}
		w.WriteHeader(status)
	}))
	b.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes cut short by Stop
	if tls {
		b.StartTLS()
	} else {
		b.Start()
	}
	tb.Cleanup(b.Close)
	return b
}

func (b *backend) set(answer func(n int64) (int, string)) { b.answer.Store(&answer) }

func always(status int, weight string) func(int64) (int, string) {
	return func(int64) (int, string) { return status, weight }
}

func (b *backend) target(tb testing.TB, rule string, typ Kind) Target {
	t := serverTarget(tb, typ, b.Listener.Addr().String())
	t.Rule = rule
	t.Check.Interval = 10 * time.Millisecond
	// A loopback answer takes well under a millisecond, but a loaded
	// machine may run neither the prober nor the server for a while: at
	// 50 ms two probes in a row timed out (UNHEALTHY before the test made
	// the backend fail) in 2 of 200 runs on a CPU shared with a busy loop.
	t.Check.Timeout = time.Second
	return t
}

// noProbers fails unless every goroutine of the package's probers has
// ended (Stop and Remove must wait for them).
func noProbers(tb testing.TB) {
	tb.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := runtime.Stack(buf, true)
		leaked := bytes.Contains(buf[:n], []byte("pkg/health.(*Checker)")) ||
			bytes.Contains(buf[:n], []byte("pkg/health.(*connector)")) ||
			bytes.Contains(buf[:n], []byte("pkg/health.(*prober)"))
		if !leaked {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("prober goroutines still running after Stop:\n%s", buf[:n])
		}
	}
}

// TestCheckerRise probes real loopback servers: 200 with weight 37 turns
// HEALTHY at the second probe, the weight reported from the first.
func TestCheckerRise(t *testing.T) {
	for _, typ := range []Kind{HTTP, HTTPS} {
		t.Run(typ.String(), func(t *testing.T) {
			b := newBackend(t, typ == HTTPS, always(200, "37"))
			rec := newRecorder()
			var atEvent []int64
			c := New(Options{Seed: 1, OnChange: func(s Status) {
				atEvent = append(atEvent, b.requests.Load())
				rec.on(s)
			}})
			defer c.Stop()
			tg := b.target(t, "web", typ)
			if err := c.Add(tg); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(t, tg.Key, healthIs(failover.HealthHealthy))
			c.Stop()
			ev := rec.all()
			if len(ev) != 2 || state(ev[0]) != "?37" || state(ev[1]) != "H37" {
				t.Fatalf("changes %v, want ?37 then H37", ev)
			}
			if !slices.Equal(atEvent, []int64{1, 2}) {
				t.Errorf("changes reported after requests %v, want [1 2]", atEvent)
			}
			if ev[1].LastError != nil || ev[1].Changes != 1 || !ev[1].Since.Equal(ev[1].LastProbe) {
				t.Errorf("HEALTHY change %+v: want no error, 1 change, since = last probe", ev[1])
			}
			if st := c.Status(); len(st) != 1 || state(st[0]) != "H37" {
				t.Errorf("Status() = %v", st)
			}
			// The probe's latency: a loopback round trip, more than
			// nothing and less than the timeout.
			if l := ev[1].LastLatency; l <= 0 || l >= tg.Check.Timeout {
				t.Errorf("last latency %v, want in (0, %v)", l, tg.Check.Timeout)
			}
		})
	}
}

func TestCheckerFallAndRecover(t *testing.T) {
	b := newBackend(t, false, always(200, "10"))
	rec := newRecorder()
	c := New(Options{Seed: 2, OnChange: rec.on})
	defer c.Stop()
	tg := b.target(t, "web", HTTP)
	if err := c.Add(tg); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, tg.Key, healthIs(failover.HealthHealthy))

	b.set(always(500, "10"))
	s := rec.waitFor(t, tg.Key, healthIs(failover.HealthUnhealthy))
	if state(s) != "U10" || !errors.Is(s.LastError, ErrStatus) {
		t.Errorf("after 500s: %v, want U10 with ErrStatus (a failing answer still reports its weight)", s)
	}

	b.set(always(0, "")) // hang past the timeout
	s = rec.waitFor(t, tg.Key, func(s Status) bool { return s.WeightState == failover.WeightUnavailable })
	if state(s) != "Uu" || !errors.Is(s.LastError, ErrTimeout) {
		t.Errorf("after timeouts: %v, want UNHEALTHY, UNAVAILABLE_WEIGHT, ErrTimeout", s)
	}

	b.set(always(200, "abc"))
	s = rec.waitFor(t, tg.Key, func(s Status) bool { return s.Health == failover.HealthHealthy && s.Changes > 1 })
	if state(s) != "Hi" || s.Changes != 3 {
		t.Errorf("after recovery: %v (%d changes), want HEALTHY, INVALID_WEIGHT, 3 changes", s, s.Changes)
	}
}

// TestCheckerClosedPort: nothing listens, so the target goes UNHEALTHY
// with UNAVAILABLE_WEIGHT after unhealthy_threshold probes.
func TestCheckerClosedPort(t *testing.T) {
	for _, typ := range []Kind{HTTP, TCP} {
		rec := newRecorder()
		c := New(Options{Seed: 3, OnChange: rec.on})
		tg := serverTarget(t, typ, closedPort(t))
		tg.Check.Interval = 10 * time.Millisecond
		tg.Check.UnhealthyThreshold = 3
		if err := c.Add(tg); err != nil {
			t.Fatal(err)
		}
		s := rec.waitFor(t, tg.Key, healthIs(failover.HealthUnhealthy))
		c.Stop()
		if ev := rec.all(); len(ev) != 1 || state(s) != "Uu" || s.LastError == nil {
			t.Errorf("%s: changes %v, want one: UNHEALTHY UNAVAILABLE_WEIGHT with an error", typ, ev)
		}
	}
}

// TestCheckerFlapping: a server that alternates 200 and 500 never turns
// HEALTHY (or UNHEALTHY) with thresholds of 2.
func TestCheckerFlapping(t *testing.T) {
	b := newBackend(t, false, func(n int64) (int, string) {
		if n%2 == 1 {
			return 200, "37"
		}
		return 500, "37"
	})
	rec := newRecorder()
	c := New(Options{Seed: 4, OnChange: rec.on})
	defer c.Stop()
	tg := b.target(t, "web", HTTP)
	if err := c.Add(tg); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); b.requests.Load() < 20; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d probes in 5s at a 10ms interval", b.requests.Load())
		}
	}
	c.Stop()
	for _, s := range rec.all() {
		if s.Health != failover.HealthUnknown {
			t.Errorf("flapping server reached %v", s)
		}
	}
	if ev := rec.all(); len(ev) != 1 || state(ev[0]) != "?37" {
		t.Errorf("changes %v, want only the first weight", ev)
	}
}

func TestCheckerNone(t *testing.T) {
	rec := newRecorder()
	never := func(context.Context, string, Key, netip.AddrPort) (net.Conn, error) {
		return nil, errors.New("NONE must not dial")
	}
	c := New(Options{Dial: never, OnChange: rec.on})
	k := Key{Rule: "udp", Backend: netip.MustParseAddr("192.0.2.1")}
	if err := c.Add(Target{Key: k, Check: Check{Kind: NoProbe}}); err != nil {
		t.Fatal(err)
	}
	s := rec.waitFor(t, k, healthIs(failover.HealthHealthy))
	c.Stop()
	if state(s) != "H1" || s.LastError != nil {
		t.Errorf("NONE: %v, want HEALTHY weight 1", s)
	}
	noProbers(t)
}

// TestCheckerReload adds and removes targets at run time: removed probers
// stop (no more requests, no more changes), unchanged ones go on
// untouched, changed ones restart with their state.
func TestCheckerReload(t *testing.T) {
	a := newBackend(t, false, always(200, "1"))
	b := newBackend(t, false, always(200, "2"))
	d := newBackend(t, false, always(200, "4"))
	rec := newRecorder()
	c := New(Options{Seed: 5, OnChange: rec.on})
	defer c.Stop()
	ta, tb := a.target(t, "ra", HTTP), b.target(t, "rb", HTTP)
	if err := c.Set([]Target{ta, tb}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, ta.Key, healthIs(failover.HealthHealthy))
	rec.waitFor(t, tb.Key, healthIs(failover.HealthHealthy))
	c.mu.Lock()
	bBefore := c.targets[tb.Key]
	c.mu.Unlock()

	// Bad sets change nothing.
	if err := c.Set([]Target{tb, tb}); err == nil {
		t.Error("Set accepted a target twice")
	}
	bad := tb
	bad.Check.Port = 0
	if err := c.Set([]Target{bad}); err == nil {
		t.Error("Set accepted port 0")
	}
	if err := c.Add(ta); err == nil {
		t.Error("Add accepted a target already probed")
	}

	td := d.target(t, "rd", HTTP)
	if err := c.Set([]Target{tb, td}); err != nil {
		t.Fatal(err)
	}
	aEvents := len(rec.all())
	// Set waits for a probe in flight to end, but a request it wrote
	// before may reach a's handler after Set returned (later still on a
	// loaded machine): count from when a's count has held still for
	// 100 ms. A prober still running (every 10 ms) never lets it.
	aRequests := a.requests.Load()
	for still, deadline := time.Now(), time.Now().Add(3*time.Second); time.Since(still) < 100*time.Millisecond; time.Sleep(10 * time.Millisecond) {
		if n := a.requests.Load(); n != aRequests {
			aRequests, still = n, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("removed target still probed: a's requests did not stop within 3 s of Set (%d)", aRequests)
		}
	}
	rec.waitFor(t, td.Key, healthIs(failover.HealthHealthy))
	time.Sleep(100 * time.Millisecond)
	if n := a.requests.Load(); n != aRequests {
		t.Errorf("removed target still probed: %d requests after its count had stopped", n-aRequests)
	}
	for _, s := range rec.all()[aEvents:] {
		if s.Key == ta.Key {
			t.Errorf("change %v reported after its removal", s)
		}
	}
	c.mu.Lock()
	bAfter := c.targets[tb.Key]
	c.mu.Unlock()
	if bAfter != bBefore {
		t.Error("an unchanged target was restarted")
	}

	// Point rb at d's server: it restarts, keeps HEALTHY (no UNKNOWN in
	// between), and reports d's weight at once.
	moved := d.target(t, "rb", HTTP)
	moved.Backend = tb.Backend
	if err := c.Set([]Target{moved, td}); err != nil {
		t.Fatal(err)
	}
	s := rec.waitFor(t, tb.Key, func(s Status) bool { return s.Weight == 4 })
	if state(s) != "H4" || s.Changes != 1 {
		t.Errorf("moved target: %v (%d changes), want H4 with its one health change kept", s, s.Changes)
	}

	if !c.Remove(td.Key) || c.Remove(td.Key) {
		t.Error("Remove: want true, then false")
	}
	if st := c.Status(); len(st) != 1 || st[0].Key != tb.Key {
		t.Errorf("Status() after Remove = %v", st)
	}
	c.Stop()
	if err := c.Set(nil); !errors.Is(err, ErrStopped) {
		t.Errorf("Set after Stop: %v, want ErrStopped", err)
	}
	if err := c.Add(ta); !errors.Is(err, ErrStopped) {
		t.Errorf("Add after Stop: %v, want ErrStopped", err)
	}
	noProbers(t)
}

// TestCheckerStopWaits stops a Checker while many probes are in flight
// (servers that hang, long timeouts) and checks that nothing is left.
func TestCheckerStopWaits(t *testing.T) {
	before := runtime.NumGoroutine()
	hang := newBackend(t, false, always(0, ""))
	ok := newBackend(t, true, always(200, "1"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := New(Options{Seed: 6})
	var targets []Target
	for i := range 30 {
		var tg Target
		switch i % 3 {
		case 0:
			tg = hang.target(t, "hang", HTTP)
			tg.Check.Timeout = time.Minute
		case 1:
			tg = ok.target(t, "ok", HTTPS)
		case 2:
			tg = serverTarget(t, TCP, ln.Addr().String())
			tg.Check.Interval = 10 * time.Millisecond
		}
		tg.Backend = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		tg.Rule += strconv.Itoa(i)
		targets = append(targets, tg)
	}
	if err := c.Set(targets); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); hang.requests.Load() < 10; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d hanging probes in flight", hang.requests.Load())
		}
	}
	start := time.Now()
	c.Stop()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Stop took %s with probes in flight", took)
	}
	noProbers(t)
	hang.Close()
	ok.Close()
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after Stop:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
	}
}

// queued returns the due times of the targets waiting for a probe and the
// number of probes in flight.
func (c *Checker) queued() (due []time.Time, busy int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.queue {
		due = append(due, t.due)
	}
	for _, t := range c.targets {
		if t.busy {
			busy++
		}
	}
	slices.SortFunc(due, time.Time.Compare)
	return due, busy
}

// TestJitter spreads the first probes of 200 targets over one interval,
// reproducibly for a seed, and fires each at its time.
func TestJitter(t *testing.T) {
	const n, interval = 200, time.Second
	clock := newFakeClock()
	var mu sync.Mutex
	dialled := map[string]time.Time{}
	dial := func(ctx context.Context, network string, _ Key, ap netip.AddrPort) (net.Conn, error) {
		addr := ap.String()
		mu.Lock()
		defer mu.Unlock()
		if _, ok := dialled[addr]; !ok {
			dialled[addr] = clock.Now()
		}
		return nil, errors.New("refused")
	}
	c := New(Options{Seed: 42, Clock: clock, Dial: dial})
	defer c.Stop()
	var targets []Target
	first := map[string]time.Duration{} // backend:port → its expected first delay
	var want []time.Time
	start := clock.Now()
	for i := range n {
		tg := Target{
			Key:   Key{Rule: "r", Backend: netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})},
			Check: Check{Kind: TCP, Port: 80, Interval: interval, Timeout: time.Second, HealthyThreshold: 2, UnhealthyThreshold: 2},
		}
		targets = append(targets, tg)
		d := firstDelay(rand.New(rand.NewPCG(42, keyHash(tg.Key))), interval)
		first[netip.AddrPortFrom(tg.Backend, 80).String()] = d
		want = append(want, start.Add(d))
	}
	if err := c.Set(targets); err != nil {
		t.Fatal(err)
	}
	// waitQueued waits until no probe is in flight and every target waits
	// for its next probe.
	waitQueued := func() []time.Time {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			due, busy := c.queued()
			if busy == 0 && len(due) == n {
				return due
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d targets queued, %d probing, want %d queued", len(due), busy, n)
			}
		}
	}
	got := waitQueued()
	slices.SortFunc(want, time.Time.Compare)
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Fatal("first due times differ from those the seed gives")
	}
	var buckets [10]int
	for _, at := range got {
		d := at.Sub(start)
		if d < 0 || d >= interval {
			t.Fatalf("first delay %s outside [0, %s)", d, interval)
		}
		buckets[d*10/interval]++
	}
	for i, b := range buckets {
		if b < 5 || b > 40 { // 20 expected in each tenth
			t.Errorf("tenth %d of the interval holds %d of %d first probes: %v", i, b, n, buckets)
		}
	}
	other := firstDelay(rand.New(rand.NewPCG(43, keyHash(targets[0].Key))), interval)
	if other == first[netip.AddrPortFrom(targets[0].Backend, 80).String()] {
		t.Error("another seed gives the same first delay")
	}

	// Each tenth of the interval, exactly the targets due by then probe.
	// The clock stops at 8/10, before any second probe (≥ 9/10) is due.
	const steps = 8
	for step := 1; step <= steps; step++ {
		clock.Advance(interval / 10)
		now := start.Add(time.Duration(step) * interval / 10)
		due := 0
		for _, d := range first {
			if d <= now.Sub(start) {
				due++
			}
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			mu.Lock()
			got := len(dialled)
			mu.Unlock()
			if got == due {
				break
			}
			if got > due || time.Now().After(deadline) {
				t.Fatalf("after %s: %d targets probed, want %d", now.Sub(start), got, due)
			}
		}
		waitQueued() // every probe has ended and its next is queued before the clock moves on
	}
	mu.Lock()
	for addr, at := range dialled {
		d := first[addr]
		if at.Sub(start) < d || at.Sub(start) >= d+interval/10 {
			t.Errorf("%s probed at %s, due at %s", addr, at.Sub(start), d)
		}
	}
	mu.Unlock()
	// Each next probe is due one period (interval ±10 %) after the due
	// time of the first, however late in the step it ran; the others
	// still wait for their first.
	var wantNext []time.Time
	probed := 0
	for _, tg := range targets {
		rng := rand.New(rand.NewPCG(42, keyHash(tg.Key)))
		d := firstDelay(rng, interval)
		if d > steps*interval/10 {
			wantNext = append(wantNext, start.Add(d))
			continue
		}
		probed++
		p := nextPeriod(rng, interval)
		if p < interval*9/10 || p > interval*11/10 {
			t.Errorf("period %s outside the interval ±10%%", p)
		}
		wantNext = append(wantNext, start.Add(d+p))
	}
	if probed < n/2 {
		t.Fatalf("only %d of %d targets probed: the check below means little", probed, n)
	}
	gotNext := waitQueued()
	slices.SortFunc(wantNext, time.Time.Compare)
	if !slices.EqualFunc(gotNext, wantNext, time.Time.Equal) {
		t.Error("second probes are not due one seeded period after the first")
	}
}

func TestSchedule(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const interval = 5 * time.Second
	lo, hi := interval, interval
	for range 10000 {
		p := nextPeriod(rng, interval)
		lo, hi = min(lo, p), max(hi, p)
		if d := firstDelay(rng, interval); d < 0 || d >= interval {
			t.Fatalf("first delay %s outside [0, %s)", d, interval)
		}
	}
	if lo < interval*9/10 || hi > interval*11/10 || lo > interval*91/100 || hi < interval*109/100 {
		t.Errorf("periods span [%s, %s], want about [4.5s, 5.5s]", lo, hi)
	}
	if p := nextPeriod(rng, 5); p != 5 {
		t.Errorf("a period too short to jitter became %d", p)
	}
	if keyHash(Key{"a", netip.MustParseAddr("10.0.0.1")}) == keyHash(Key{"b", netip.MustParseAddr("10.0.0.1")}) {
		t.Error("two rules share a random stream for one backend")
	}
}

// TestOnChangeSerialised: changes of many targets arriving together reach
// OnChange one at a time.
func TestOnChangeSerialised(t *testing.T) {
	var inside, overlaps, calls atomic.Int64
	c := New(Options{Seed: 8, OnChange: func(Status) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		time.Sleep(time.Millisecond)
		calls.Add(1)
		inside.Add(-1)
	}})
	var targets []Target
	for i := range 40 {
		targets = append(targets, Target{
			Key:   Key{Rule: "none", Backend: netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})},
			Check: Check{Kind: NoProbe},
		})
	}
	if err := c.Set(targets); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); calls.Load() < 40; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 40 changes reported", calls.Load())
		}
	}
	c.Stop()
	if overlaps.Load() != 0 {
		t.Errorf("%d OnChange calls overlapped another", overlaps.Load())
	}
	for _, s := range c.Status() {
		if state(s) != "H1" {
			t.Errorf("%v, want HEALTHY weight 1", s)
		}
		// One target's status is what Status has for it.
		if one, ok := c.StatusOf(s.Key); !ok || one != s {
			t.Errorf("StatusOf(%v) = %v, %v; Status has %v", s.Key, one, ok, s)
		}
	}
	if _, ok := c.StatusOf(Key{Rule: "none", Backend: netip.AddrFrom4([4]byte{192, 0, 2, 200})}); ok {
		t.Error("StatusOf a target never set: found")
	}
}

// TestCheckerIPv6 probes a server on [::1]: the address is dialled and
// sent in the Host header in brackets.
func TestCheckerIPv6(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	hosts := make(chan string, 100)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts <- r.Host
		w.Header().Set(WeightHeader, "6")
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	rec := newRecorder()
	c := New(Options{Seed: 9, OnChange: rec.on})
	defer c.Stop()
	tg := serverTarget(t, HTTP, ln.Addr().String())
	tg.Check.Interval = 10 * time.Millisecond
	if err := c.Add(tg); err != nil {
		t.Fatal(err)
	}
	if s := rec.waitFor(t, tg.Key, healthIs(failover.HealthHealthy)); state(s) != "H6" {
		t.Errorf("%v, want H6", s)
	}
	if h := <-hosts; h != ln.Addr().String() {
		t.Errorf("Host %q, want %q", h, ln.Addr().String())
	}
}

// TestCheckerFrom: a target that starts from a carried HEALTHY verdict
// (xlb restart) reports nothing while its probes pass — from UNKNOWN its
// first pass would report the weight with the health still UNKNOWN — and
// goes UNHEALTHY after unhealthy_threshold failures, as a target that had
// been HEALTHY all along.
func TestCheckerFrom(t *testing.T) {
	b := newBackend(t, false, always(200, "37"))
	rec := newRecorder()
	c := New(Options{Seed: 3, OnChange: rec.on})
	defer c.Stop()
	tg := b.target(t, "web", HTTP)
	since := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	tg.From = &Verdict{Health: failover.HealthHealthy, Weight: 37, WeightState: failover.WeightOK, Since: since}
	if err := c.Add(tg); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); b.requests.Load() < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d probes in 5 s", b.requests.Load())
		}
	}
	if ev := rec.all(); len(ev) != 0 {
		t.Fatalf("changes %v after passing probes of a carried HEALTHY verdict, want none", ev)
	}
	if st, ok := c.StatusOf(tg.Key); !ok || state(st) != "H37" || !st.Since.Equal(since) {
		t.Fatalf("status %v (since %v), want H37 since the carried %v", st, st.Since, since)
	}
	b.set(always(500, "37"))
	s := rec.waitFor(t, tg.Key, healthIs(failover.HealthUnhealthy))
	if ev := rec.all(); len(ev) != 1 || state(s) != "U37" || s.Changes != 1 {
		t.Errorf("changes %v, want one: U37, its first health change", ev)
	}
}
