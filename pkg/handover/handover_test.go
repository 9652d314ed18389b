package handover

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// envScenario makes the test binary play a successor (TestMain).
const envScenario = "XLB_HANDOVER_TEST_SCENARIO"

func TestMain(m *testing.M) {
	if sc, ok := os.LookupEnv(envScenario); ok {
		if err := successorScenario(sc); err != nil {
			fmt.Fprintln(os.Stderr, "successor:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type cutoverBody struct {
	Free map[int][]uint64 `json:"free"`
}

// successorScenario is the child's side: scenario says where it stops or
// what it refuses.
func successorScenario(sc string) error {
	s, err := Inherited(Timeouts{Step: 2 * time.Second, Prepare: 5 * time.Second})
	if err != nil || s == nil {
		return fmt.Errorf("inherited: %v %v", s, err)
	}
	if os.Getenv(EnvFD) != "" {
		return errors.New("EnvFD still set")
	}
	if sc == "silent" {
		return nil // exits without HELLO
	}
	if err := s.Hello(Hello{Build: "test-build", States: []int{1, 2}}); err != nil {
		return err
	}
	if sc == "hang" {
		time.Sleep(time.Minute)
		return nil
	}
	o, err := s.ReceiveOffer()
	if err != nil {
		return err
	}
	defer o.Close()
	if o.StateVersion != 2 || string(o.State) != `{"rules":["web"]}` {
		return fmt.Errorf("offer: version %d state %q", o.StateVersion, o.State)
	}
	fd, ok := o.Take("arena")
	if !ok {
		return fmt.Errorf("no arena among %v", o.Names())
	}
	if len(o.Names()) != 300 {
		return fmt.Errorf("%d other files, want 300", len(o.Names()))
	}
	arena := os.NewFile(uintptr(fd), "arena")
	defer arena.Close()
	buf := make([]byte, 5)
	if _, err := arena.ReadAt(buf, 0); err != nil || string(buf) != "state" {
		return fmt.Errorf("arena holds %q (%v)", buf, err)
	}
	switch sc {
	case "abort":
		return s.Abort("invalid configuration: xlb.toml:3: interface: required")
	case "crash":
		os.Exit(3)
	}
	if err := s.Ready("queue 0 conntrack starts empty: test"); err != nil {
		return err
	}
	var body cutoverBody
	if err := s.WaitCutover(&body); err != nil {
		return err
	}
	if sc == "failed" {
		return s.Failed("cannot map rings")
	}
	if len(body.Free[0]) != 3 {
		return fmt.Errorf("cut-over body %+v", body)
	}
	// The successor now owns the arena: it writes to it.
	if _, err := arena.WriteAt([]byte("TAKEN"), 0); err != nil {
		return err
	}
	return s.Done()
}

// start runs the test binary as a successor in scenario sc.
func start(t *testing.T, sc string, to Timeouts) (*Predecessor, Hello, error) {
	t.Helper()
	return Start(Options{
		Path:     os.Args[0],
		Env:      append(os.Environ(), envScenario+"="+sc),
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Timeouts: to,
	})
}

// offer sends an arena memfd holding "state" and 300 more fds (more than
// one message's worth).
func offer(t *testing.T, p *Predecessor) *os.File {
	t.Helper()
	fd, err := unix.MemfdCreate("test-arena", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	arena := os.NewFile(uintptr(fd), "arena")
	t.Cleanup(func() { arena.Close() })
	if _, err := arena.WriteAt([]byte("state"), 0); err != nil {
		t.Fatal(err)
	}
	files := []File{{Name: "arena", FD: fd}}
	for i := range 300 {
		files = append(files, File{Name: fmt.Sprintf("dup-%d", i), FD: int(os.Stdin.Fd())})
	}
	if err := p.Offer(ChooseState([]int{1, 2, 3}, []int{1, 2}), []byte(`{"rules":["web"]}`), "", files); err != nil {
		t.Fatal(err)
	}
	return arena
}

func arenaHolds(t *testing.T, f *os.File) string {
	t.Helper()
	buf := make([]byte, 5)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	return string(buf)
}

// TestHandOver runs the whole conversation with a real second process.
func TestHandOver(t *testing.T) {
	p, h, err := start(t, "ok", Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Build != "test-build" || h.PID != p.PID() || h.Protocol != Protocol {
		t.Errorf("hello %+v", h)
	}
	arena := offer(t, p)
	notes, err := p.WaitReady()
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || notes[0] != "queue 0 conntrack starts empty: test" {
		t.Errorf("notes %q", notes)
	}
	if got := arenaHolds(t, arena); got != "state" {
		t.Errorf("before the cut-over the arena holds %q", got)
	}
	if err := p.Cutover(cutoverBody{Free: map[int][]uint64{0: {0, 4096, 8192}}}); err != nil {
		t.Fatal(err)
	}
	if got := arenaHolds(t, arena); got != "TAKEN" {
		t.Errorf("after DONE the arena holds %q, want the successor's write", got)
	}
	p.Close()
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("successor did not exit")
	}
	if p.cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("successor exit code %d", p.cmd.ProcessState.ExitCode())
	}
}

// TestHandOverFailures: every failure of the successor reaches the
// predecessor as an error naming the step, within the step's deadline,
// and leaves what it offered as it was.
func TestHandOverFailures(t *testing.T) {
	// Only the hanging successor meets the short preparation deadline:
	// the others answer as soon as they have read the offer's 301 fds,
	// which took over 700 ms once beside a build loop (load 13).
	short := Timeouts{Hello: 3 * time.Second, Prepare: 700 * time.Millisecond, Step: 2 * time.Second}
	roomy := Timeouts{Hello: 3 * time.Second, Prepare: 10 * time.Second, Step: 5 * time.Second}
	tests := []struct {
		sc      string
		to      Timeouts
		refused bool
		want    string
	}{
		{"abort", roomy, true, "invalid configuration: xlb.toml:3"},
		{"crash", roomy, false, "closed the hand-over connection"},
		{"hang", short, false, "no answer within 700ms"},
		{"failed", roomy, true, "cannot map rings"},
	}
	for _, tt := range tests {
		t.Run(tt.sc, func(t *testing.T) {
			p, _, err := start(t, tt.sc, tt.to)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Abandon()
			var arena *os.File
			if tt.sc != "hang" {
				arena = offer(t, p)
			}
			begin := time.Now()
			_, err = p.WaitReady()
			if tt.sc == "failed" {
				if err != nil {
					t.Fatal(err)
				}
				err = p.Cutover(cutoverBody{})
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || IsRefused(err) != tt.refused {
				t.Fatalf("error %v (refused %v), want %q (refused %v)", err, IsRefused(err), tt.want, tt.refused)
			}
			if d := time.Since(begin); d > 5*time.Second {
				t.Errorf("failure took %v to notice", d)
			}
			if arena != nil {
				if got := arenaHolds(t, arena); got != "state" {
					t.Errorf("arena holds %q after a failed hand-over", got)
				}
			}
			p.Abandon()
			select {
			case <-p.Exited():
			default:
				t.Error("Abandon left the successor running")
			}
		})
	}
	t.Run("silent", func(t *testing.T) {
		_, _, err := start(t, "silent", short)
		if err == nil || !strings.Contains(err.Error(), "hello") {
			t.Fatalf("start of a successor that never says hello: %v", err)
		}
	})
}

func TestChooseState(t *testing.T) {
	for _, tt := range []struct {
		ours, theirs []int
		want         int
	}{
		{[]int{1}, []int{1}, 1},
		{[]int{1, 2}, []int{1, 2, 3}, 2},
		{[]int{3, 1}, []int{1, 3}, 3},
		{[]int{2}, []int{1}, 0},
		{nil, []int{1}, 0},
	} {
		if got := ChooseState(tt.ours, tt.theirs); got != tt.want {
			t.Errorf("ChooseState(%v, %v) = %d, want %d", tt.ours, tt.theirs, got, tt.want)
		}
	}
}

// TestMessageLimits: names must match the fds, and the state document
// may be larger than any message.
func TestMessageLimits(t *testing.T) {
	c, theirs, err := newPair()
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	other, err := fileConn(theirs)
	if err != nil {
		t.Fatal(err)
	}
	defer other.close()
	if err := c.send(message{Type: msgFiles, Names: []string{"a", "b"}}, []int{int(os.Stdin.Fd())}, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.recv("test", time.Second); err == nil || !strings.Contains(err.Error(), "2 names for 1 fds") {
		t.Errorf("mismatched names: %v", err)
	}
	big := bytes.Repeat([]byte("x"), 4<<20)
	p := &Predecessor{c: c, to: Timeouts{}.withDefaults()}
	go p.Offer(1, big, "", nil)
	s := &Successor{c: other, to: Timeouts{}.withDefaults()}
	o, err := s.ReceiveOffer()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(o.State, big) {
		t.Errorf("state of %d bytes arrived as %d", len(big), len(o.State))
	}
	if _, _, err := other.recv("test", 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no answer within") {
		t.Errorf("recv with nothing sent: %v", err)
	}
}
