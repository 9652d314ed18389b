package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// bpffsDir mounts a bpf filesystem on a fresh directory for pin_dir. It is
// outside /sys, so every `ip netns exec` (which mounts a /sys of its own)
// sees the same pins: a daemon started after another one died finds them.
func bpffsDir(t *testing.T) string {
	t.Helper()
	testutil.RequireRoot(t) // before the mount: without root the test skips, saying why
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mount bpf filesystem on %s: %v", dir, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// watched is one long-lived connection asking every 100 ms in the
// background; it records whether it broke or moved.
type watched struct {
	k        *keepAlive
	home     string
	asks     atomic.Int64
	slow     atomic.Int64 // the slowest answer, ns
	answered atomic.Int64 // when the last answered request was sent, Unix ns
	broken   atomic.Value // error
	moved    atomic.Value // string: the backend it answered from instead
}

// openWatched opens a long-lived connection from each source and asks
// once, which makes the backend it answers from its home; an answer may
// take up to wait.
func openWatched(t *testing.T, l *lab.Lab, srcs []netip.Addr, wait time.Duration) []*watched {
	t.Helper()
	ws := make([]*watched, 0, len(srcs))
	for _, src := range srcs {
		k := openKeepAlive(t, l, src)
		rep, err := k.ask()
		if err != nil {
			t.Fatal(err)
		}
		k.wait = wait
		ws = append(ws, &watched{k: k, home: rep.Backend})
	}
	return ws
}

// watchAll keeps every connection busy until the returned stop is called.
func watchAll(ws []*watched) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Spread the requests over the 100 ms.
			time.Sleep(time.Duration(i%100) * time.Millisecond)
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				start := time.Now()
				rep, err := w.k.ask()
				w.asks.Add(1)
				if d := int64(time.Since(start)); d > w.slow.Load() {
					w.slow.Store(d)
				}
				if err != nil {
					w.broken.Store(err)
					return
				}
				w.answered.Store(start.UnixNano())
				if rep.Backend != w.home {
					w.moved.Store(rep.Backend)
				}
			}
		}()
	}
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// awaitAnswers waits up to d until every connection that did not break
// has answered a request sent after since, and returns how many have not.
// A request still waiting counts neither as broken nor as slow: a check
// that only sleeps passes while the connections wait out a gap, and their
// timeouts then fail the next phase instead.
func awaitAnswers(ws []*watched, since time.Time, d time.Duration) (waiting int) {
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		waiting = 0
		for _, w := range ws {
			if w.broken.Load() == nil && w.answered.Load() < since.UnixNano() {
				waiting++
			}
		}
		if waiting == 0 || time.Now().After(deadline) {
			return waiting
		}
	}
}

// tally counts broken and moved connections and describes the first few
// and the slowest answer.
func tally(ws []*watched) (broken, moved int, asks int64, detail string) {
	var b strings.Builder
	var slowest time.Duration
	for _, w := range ws {
		asks += w.asks.Load()
		slowest = max(slowest, time.Duration(w.slow.Load()))
		if err, ok := w.broken.Load().(error); ok {
			broken++
			if broken <= 3 {
				fmt.Fprintf(&b, " %s broke: %v;", w.k.src, err)
			}
		}
		if m, ok := w.moved.Load().(string); ok {
			moved++
			if moved <= 3 {
				fmt.Fprintf(&b, " %s moved %s → %s;", w.k.src, w.home, m)
			}
		}
	}
	fmt.Fprintf(&b, " the slowest answer took %v", slowest.Round(time.Millisecond))
	return broken, moved, asks, b.String()
}

// udpStream sends numbered datagrams at a steady rate to the VIP's echo
// service and records when each was sent and which came back.
type udpStream struct {
	c        *net.UDPConn
	start    time.Time
	sent     atomic.Uint64
	sendErrs atomic.Uint64
	sentAt   []int64 // ns after start, by sequence number
	mu       sync.Mutex
	got      map[uint64]time.Time // echoes back at the client
	fwd      map[uint64]time.Time // forwarded by xlb (seen leaving it, at the router)
	capDrops uint64               // datagrams the router capture itself missed
	done     chan struct{}        // stops the sender
	drained  chan struct{}        // stops the capture, after the last datagram arrived
	wg       sync.WaitGroup
	stopOnce sync.Once
}

func startUDPStream(t *testing.T, l *lab.Lab, src netip.Addr, rate int) *udpStream {
	t.Helper()
	c, err := l.ListenUDP(netip.AddrPortFrom(src, 0))
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadBuffer(8 << 20)
	s := &udpStream{c: c, got: map[uint64]time.Time{}, fwd: map[uint64]time.Time{}, done: make(chan struct{}), drained: make(chan struct{}), start: time.Now(), sentAt: make([]int64, rate*60)}
	dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(l.Opts.VIP4, l.Opts.UDPPort))
	s.capture(t, l, src)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 64)
		var seq uint64
		for {
			select {
			case <-s.done:
				return
			default:
			}
			// Keep to the schedule, then sleep a millisecond. A sender
			// that was not scheduled for a while skips what it missed
			// beyond 50 ms (marked unsent) rather than bursting it out.
			due := min(uint64(time.Since(s.start).Seconds()*float64(rate)), uint64(len(s.sentAt)))
			for ; seq+uint64(rate/20) < due; seq++ {
				s.sentAt[seq] = -1
			}
			for ; seq < due; seq++ {
				binary.BigEndian.PutUint64(buf, seq)
				s.sentAt[seq] = int64(time.Since(s.start))
				if _, err := c.WriteToUDP(buf, dst); err != nil {
					s.sentAt[seq] = -1
					s.sendErrs.Add(1)
				}
				s.sent.Store(seq + 1)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 2048)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if n >= 8 {
				s.mu.Lock()
				s.got[binary.BigEndian.Uint64(buf)] = time.Now()
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// capture records every datagram of the stream that xlb forwards, as it
// arrives at the router from the appliance (IPIP, the inner packet from
// src): the kernel's forwarding there is not starved by the lab's own
// userspace (decapsulation and echo servers), so this says what xlb did.
func (s *udpStream) capture(t *testing.T, l *lab.Lab, src netip.Addr) {
	t.Helper()
	var fd int
	err := l.Router.Do(func() error {
		ifi, err := net.InterfaceByName(l.Appliances[0].RouterLink)
		if err != nil {
			return err
		}
		// ETH_P_ALL: a bridge port's frames reach only the taps that run
		// before the bridge takes them.
		proto := htons(unix.ETH_P_ALL)
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(proto)); err != nil {
			return err
		}
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("capture at the router: %v", err)
	}
	want := src.As4()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer unix.Close(fd)
		buf := make([]byte, 2048)
		for {
			select {
			case <-s.drained:
				if st, err := unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
					s.mu.Lock()
					s.capDrops += uint64(st.Drops)
					s.mu.Unlock()
				}
				return
			default:
			}
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue // timeout: look at done again
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype == unix.PACKET_OUTGOING || ll.Protocol != htons(unix.ETH_P_IP) {
				continue
			}
			p := buf[:n]
			// outer IPv4 (IPIP) → inner IPv4 from src, UDP → seq.
			if n < 20 || p[9] != 4 {
				continue
			}
			inner := p[int(p[0]&0xf)*4:]
			if len(inner) < 28 || inner[9] != 17 || [4]byte(inner[12:16]) != want {
				continue
			}
			udp := inner[int(inner[0]&0xf)*4:]
			if len(udp) < 16 {
				continue
			}
			seq := binary.BigEndian.Uint64(udp[8:])
			s.mu.Lock()
			if _, dup := s.fwd[seq]; !dup {
				s.fwd[seq] = time.Now()
			}
			s.mu.Unlock()
		}
	}()
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// stop ends the stream and waits for late echoes.
func (s *udpStream) stop() {
	s.stopOnce.Do(func() {
		close(s.done)
		time.Sleep(500 * time.Millisecond)
		close(s.drained)
		s.c.Close()
		s.wg.Wait()
	})
}

// loss counts the datagrams sent in [from, to) and those of them that
// xlb did not forward (echo false) or that never came back (echo true);
// maxGap is the longest time between two of them arriving.
func (s *udpStream) loss(from, to time.Time, echo bool) (sent, lost uint64, maxGap time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := s.fwd
	if echo {
		seen = s.got
	}
	lo, hi := int64(from.Sub(s.start)), int64(to.Sub(s.start))
	var last time.Time
	for seq := range s.sent.Load() {
		if at := s.sentAt[seq]; at < lo || at >= hi {
			continue
		}
		sent++
		got, ok := seen[seq]
		if !ok {
			lost++
			continue
		}
		if !last.IsZero() && got.Sub(last) > maxGap {
			maxGap = got.Sub(last)
		}
		if got.After(last) {
			last = got
		}
	}
	return sent, lost, maxGap
}

// phaseLoss runs a 20 kpps stream for a second before and after during,
// which hands over (and returns when its workers stopped and how long the
// pause was). Loss is counted where xlb's output arrives at the router
// (what xlb did not forward); the echo's loss, which adds the lab's own
// backends, is logged beside it. It returns the loss of the datagrams
// sent from 100 ms before the cut-over to 100 ms after the successor's
// workers started, and of the whole phase; measured is false when the
// sender itself did not get the CPU to send the stream around the
// cut-over (a loaded machine): that attempt says nothing.
func phaseLoss(t *testing.T, l *lab.Lab, src netip.Addr, what string, during func() (time.Time, time.Duration)) (window, whole float64, measured bool) {
	t.Helper()
	s := startUDPStream(t, l, src, 20000)
	time.Sleep(time.Second)
	cut, pause := during()
	time.Sleep(time.Second)
	s.stop()
	sent, lost, gap := s.loss(s.start, time.Now(), false)
	_, elost, egap := s.loss(s.start, time.Now(), true)
	whole = float64(lost) / float64(max(sent, 1))
	t.Logf("%s: UDP at 20 kpps, whole phase: %d sent (%d send errors), %d not forwarded by xlb (%.3f %%; capture drops %d), longest gap %v; %d echoes missing (%.3f %%), longest gap %v",
		what, sent, s.sendErrs.Load(), lost, 100*whole, s.capDrops, gap, elost, 100*float64(elost)/float64(max(sent, 1)), egap)
	if lost > 0 {
		var b strings.Builder
		for at := s.start; at.Before(time.Now()); at = at.Add(100 * time.Millisecond) {
			_, n, _ := s.loss(at, at.Add(100*time.Millisecond), false)
			fmt.Fprintf(&b, " %d", n)
		}
		t.Logf("%s: not forwarded per 100 ms from %s (the cut-over at %v):%s", what, s.start.UTC().Format("15:04:05.000"), cut.Sub(s.start).Round(time.Millisecond), b.String())
	}
	if cut.IsZero() {
		return 1, whole, false
	}
	wsent, wlost, wgap := s.loss(cut.Add(-100*time.Millisecond), cut.Add(pause+100*time.Millisecond), false)
	window = float64(wlost) / float64(max(wsent, 1))
	t.Logf("%s: across the cut-over (pause %v): %d sent, %d not forwarded (%.3f %%), longest gap %v", what, pause, wsent, wlost, 100*window, wgap)
	if sent < 20000 || wsent < 500 {
		t.Logf("%s: only %d datagrams sent (%d across the cut-over): the sender was starved; not a measurement", what, sent, wsent)
		return window, whole, false
	}
	return window, whole, true
}

// stopDaemon runs `xlb stop` in the appliance's namespace and waits for
// whichever daemon serves there to exit (the lab process's stderr pipe is
// held by every successor).
func stopDaemon(t *testing.T, l *lab.Lab, x *labXLB) {
	t.Helper()
	var out, errOut string
	var err error
	l.XLB.Do(func() error {
		out, errOut, err = runXLB(t, "stop", "-c", x.config)
		return nil
	})
	if err != nil {
		t.Errorf("xlb stop: %v %s", err, errOut)
	}
	t.Logf("xlb stop: %s", strings.TrimSpace(out))
	select {
	case err := <-x.exited:
		x.exited <- err // for a later stopDaemon of the same x
	case <-time.After(20 * time.Second):
		t.Errorf("the daemon did not exit after xlb stop")
	}
}

// xdpAttached reports whether the appliance's interface has a program.
func xdpAttached(t *testing.T, l *lab.Lab) bool {
	t.Helper()
	out, err := l.XLB.Output("ip", "link", "show", lab.XLBInterface)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(out, "xdp")
}

func restartXLB(t *testing.T, x *labXLB, args ...string) (*control.RestartResult, error) {
	t.Helper()
	out, errOut, err := runXLB(t, append(args, "-c", x.config, "--json")...)
	if err != nil {
		return nil, fmt.Errorf("%v (stderr %q)", err, errOut)
	}
	var res control.RestartResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return nil, fmt.Errorf("decode %q: %w", out, err)
	}
	// The successor is nobody's child here: a test that fails before its
	// xlb stop must not leave it running (it also stops by itself once the
	// lab's interface is gone: TestInterfaceGone).
	t.Cleanup(func() {
		if p, err := os.FindProcess(res.PID); err == nil && p.Signal(syscall.Signal(0)) == nil {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", res.PID)); strings.Contains(string(b), x.config) {
				p.Kill()
			}
		}
	})
	return &res, nil
}

// waitExited waits until process pid has exited: gone, or a zombie (its
// parent, the predecessor that started it, may be gone too) whose every
// thread has exited. A killed daemon holds its sockets until its last
// thread is gone: its TUN went first, and its control socket still
// accepted while the main thread was a zombie and another thread was still
// exiting. It returns how long it waited.
func waitExited(t *testing.T, pid int, within time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	testutil.WaitFor(t, within, what, func() (bool, string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true, ""
		}
		// After the command's closing parenthesis: state, then 16 more
		// fields up to num_threads.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			return false, string(b)
		}
		f := strings.Fields(string(b[i+1:]))
		return len(f) > 17 && (f[0] == "Z" || f[0] == "X") && f[17] == "1", string(b)
	})
	return time.Since(start)
}

// buildUpgrade builds this package into a new executable that differs
// from the test binary (stripped, another link), with more linker flags.
// It builds with the test's own environment, so every package comes from
// the build cache the test binary filled and only the link is new (with
// CGO_ENABLED=0 it recompiled the whole dependency tree: minutes on a
// cold cache).
func buildUpgrade(dir string, ldflags ...string) (string, error) {
	bin := filepath.Join(dir, fmt.Sprintf("xlb-upgrade-%d", len(ldflags)))
	flags := "-ldflags=" + strings.Join(append([]string{"-s", "-w"}, ldflags...), " ")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", flags, "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the upgrade: %v\n%s", err, out)
	}
	return bin, nil
}

// built waits for a build started in the background.
func built(t *testing.T, c chan string, errs chan error) string {
	t.Helper()
	select {
	case bin := <-c:
		return bin
	case err := <-errs:
		t.Fatal(err)
	}
	return ""
}

// TestEndToEndRestart: 200 long-lived connections opened before a fourth
// backend was added (so Maglev alone would move about a quarter), plus a
// 20 kpps UDP stream through the VIP. A successor that fails leaves the
// daemon serving; xlb restart and xlb upgrade keep every connection on its
// backend and lose (almost) no datagram; stop + start, for contrast,
// breaks some of them.
func TestEndToEndRestart(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 4, XLBPinDir: bpffsDir(t)})
	udpRule := l.DefaultRules("IPIP")[2] // udp4: CLIENT_IP, PER_SESSION (the shared table)
	rules := []lab.Rule{l.DefaultRules("IPIP")[0], udpRule}
	for i := range rules {
		rules[i].Health = healthNone
		rules[i].Backends = []int{0, 1, 2}
	}
	upgrade, relayout, buildErr := make(chan string, 1), make(chan string, 1), make(chan error, 2)
	bins := t.TempDir()
	go func() { // while the lab starts
		bin, err := buildUpgrade(bins)
		if err != nil {
			buildErr <- err
			return
		}
		upgrade <- bin
		// Another build whose conntrack arenas have another layout.
		if bin, err = buildUpgrade(bins, "-X github.com/xlbnet/xlb/conntrack.arenaLayoutRevision=test-relayout"); err != nil {
			buildErr <- err
			return
		}
		relayout <- bin
	}()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	x, err := startLabXLB(ctx, l, dir, rules, func(s string) { t.Log(s) })
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stopDaemon(t, l, x) }()
	sock := filepath.Join(dir, "xlb.sock")
	testutil.WaitFor(t, 20*time.Second, "control socket", func() (bool, string) {
		_, _, err := xlbCtl(t, sock, 1, "status", "--json")
		return err == nil, fmt.Sprint(err)
	})

	ws := openWatched(t, l, l.ClientAddrs4[:200], 15*time.Second) // a loaded machine may stall a request; a broken one fails at once
	for i := range rules {
		rules[i].Backends = []int{0, 1, 2, 3}
	}
	reloadWith(t, l, x, rules)
	if res := drive(t, l, 200, 4); !res.OK() || res.PerBackend[3] == 0 {
		t.Fatalf("after adding be3 new connections: %v (errors %d)", res.PerBackend, res.Errors)
	}
	stopWatch := watchAll(ws)
	check := func(phase string) {
		t.Helper()
		broken, moved, asks, detail := tally(ws)
		t.Logf("%s: %d of %d connections broken, %d moved (%d requests so far)%s", phase, broken, len(ws), moved, asks, detail)
		if broken+moved > 0 {
			t.Errorf("%s: %d connections broken and %d moved, want none", phase, broken, moved)
		}
	}
	udpSrc := l.ClientAddrs4[len(l.ClientAddrs4)-1]

	// A successor with an invalid configuration gives up; the daemon
	// serves on and the command says why.
	bad := filepath.Join(x.dir, "bad.toml")
	text, _ := os.ReadFile(x.config)
	os.WriteFile(bad, []byte(strings.Replace(string(text), "queues = \"all\"", "queues = \"all\"\nmaglev_table_size = 100", 1)), 0o644)
	_, errOut, err := runXLB(t, "restart", "-c", bad)
	if err == nil || exitCode(err) == 0 || !strings.Contains(err.Error(), "maglev_table_size: 100 is not prime") {
		t.Errorf("restart into an invalid configuration: %v (exit %d, stderr %q), want exit ≠ 0 with the reason", err, exitCode(err), errOut)
	} else {
		t.Logf("restart into an invalid configuration: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	check("after a failed restart")

	// Each hand-over is measured on a 20 kpps stream. The pause is
	// buffered by the RX ring (2048 slots: 100 ms at 20 kpps), so a
	// hand-over itself loses nothing; a loaded machine can still starve
	// the worker threads for longer (measured here: up to 600 ms at a load
	// average of 10 on the 2 cores) and lose datagrams unrelated to the
	// mechanism. So each kind of hand-over is repeated, up to three times,
	// until one shows the ≤ 0.1 % its design promises; none may ever break
	// or move a connection.
	handOver := func(what string, args ...string) *control.RestartResult {
		t.Helper()
		var res *control.RestartResult
		for attempt := 1; attempt <= 3; attempt++ {
			loss, _, measured := phaseLoss(t, l, udpSrc, fmt.Sprintf("%s (attempt %d)", what, attempt), func() (time.Time, time.Duration) {
				res, err = restartXLB(t, x, args...)
				if err != nil {
					return time.Time{}, 0
				}
				return res.CutoverAt, time.Duration(res.PauseMS * float64(time.Millisecond))
			})
			if err != nil {
				t.Fatalf("%s: %v\n%s", what, err, x.log)
			}
			t.Logf("%s (attempt %d): successor pid %d, build %s, %d queues, pause %.2f ms, notes %q", what, attempt, res.PID, res.Build, res.Queues, res.PauseMS, res.Notes)
			check(fmt.Sprintf("after %s (attempt %d)", what, attempt))
			if measured && loss <= 0.001 {
				return res
			}
		}
		t.Errorf("%s: no attempt of three measured a UDP loss across the cut-over of at most 0.1 %%", what)
		return res
	}
	restarted := handOver("xlb restart", "restart")
	bin := built(t, upgrade, buildErr)
	upgraded := handOver("xlb upgrade", "upgrade", "--binary", bin)
	if upgraded.Build == restarted.Build {
		t.Errorf("the upgrade runs build %s, the same as before", upgraded.Build)
	}
	stopWatch()

	// The contrast: stop, then a cold start. Connections whose Maglev
	// choice changed with be3 land on a backend that resets them.
	stopDaemon(t, l, x)
	if xdpAttached(t, l) {
		t.Error("xlb stop left the program attached")
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	x, err = startLabXLB(ctx, l, dir, rules, func(s string) { t.Log(s) })
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, w := range ws {
		if w.broken.Load() != nil {
			continue
		}
		rep, err := w.k.ask()
		if err != nil || rep.Backend != w.home {
			lost++
		}
	}
	t.Logf("stop + start: %d of %d connections broken or moved", lost, len(ws))
	if lost == 0 {
		t.Error("stop + start kept every connection: the contrast shows nothing (did the reload move none?)")
	}

	// An upgrade into a build whose conntrack arenas have another layout:
	// the tables start empty, the answer and the log say so, and the
	// daemon serves on (flows keep their backend where Maglev agrees,
	// which after the cold start above is everywhere).
	fresh := openWatched(t, l, l.ClientAddrs4[:50], 15*time.Second)
	stopFresh := watchAll(fresh)
	res, err := restartXLB(t, x, "upgrade", "--binary", built(t, relayout, buildErr))
	if err != nil {
		t.Fatalf("upgrade across a conntrack layout change: %v", err)
	}
	t.Logf("upgrade across a conntrack layout change: notes %q", res.Notes)
	notes := strings.Join(res.Notes, "\n")
	for _, want := range []string{"queue 0 conntrack starts empty", "queue 1 conntrack starts empty", "ct-sessions starts empty", "conntrack arena has another layout"} {
		if !strings.Contains(notes, want) {
			t.Errorf("the upgrade's notes lack %q", want)
		}
	}
	time.Sleep(time.Second)
	stopFresh()
	if broken, moved, _, detail := tally(fresh); broken+moved > 0 {
		t.Errorf("after the upgrade across a layout change: %d broken, %d moved%s", broken, moved, detail)
	}
}

// pinsIn lists what xlb left in a pin root (the kernel's own *.debug
// files of a fresh bpf filesystem aside).
func pinsIn(root string) []string {
	var out []string
	es, _ := os.ReadDir(root)
	for _, e := range es {
		if !strings.HasSuffix(e.Name(), ".debug") {
			out = append(out, e.Name())
		}
	}
	return out
}

// whereLost says where the requests of a failed drive went missing. The
// failure seen (about half of 50 requests timing out, during a few minutes
// of a shared machine, not reproduced since) points at one of the two
// queues or one of the two backends: per backend its answers, the packets
// xlb sent it and what its decap received; per queue the packets in and
// out, drops and the socket's ring statistics; the daemon's drops.
func whereLost(t *testing.T, l *lab.Lab, x *labXLB, res lab.DriveResult) string {
	t.Helper()
	var b strings.Builder
	out, errOut, err := xlbCtl(t, x.Socket(), 1, "status", "--json")
	var st control.Status
	if err == nil {
		err = json.Unmarshal([]byte(out), &st)
	}
	if err != nil {
		fmt.Fprintf(&b, "xlb status: %v %s\n", err, errOut)
	}
	sent := map[string]int64{}
	for _, r := range st.Rules {
		for _, be := range r.Backends {
			sent[be.Address] += be.Packets
		}
	}
	for i, be := range l.Backends {
		s := be.Stats()
		fmt.Fprintf(&b, "backend %d (%s): %d answers, xlb sent %d packets, decap received %d, delivered %d, dropped %d\n",
			i, be.Tunnel4, res.PerBackend[i], sent[be.Tunnel4.String()], s.DecapCounters.Received, s.DecapCounters.Delivered, s.DecapCounters.Dropped())
	}
	for _, q := range st.QueueStats {
		fmt.Fprintf(&b, "queue %d: rx %d, tx %d, drops %d, xsk %+v\n", q.Queue, q.RXPackets, q.TXPackets, q.Drops, q.XSK)
	}
	fmt.Fprintf(&b, "xlb drops %v, passes %v, kernel rx dropped %d", st.Counters.Drops, st.Counters.Passes, st.Counters.KernelRXD)
	return b.String()
}

// TestEndToEndCrash: after kill -9 the program stays attached and drops
// VIP packets (a SYN to a VIP the appliance also holds locally times out
// instead of being reset); xlb run takes over the pins; xlb stop removes
// everything, with a daemon and without one.
func TestEndToEndCrash(t *testing.T) {
	pins := bpffsDir(t)
	l := labWith(t, lab.Options{Backends: 2, XLBPinDir: pins})
	rules := l.DefaultRules("IPIP")[:1]
	rules[0].Health = healthNone
	// The VIP is local on the appliance too: a VIP packet passed to its
	// kernel would be answered with a reset.
	if err := l.XLB.Run("ip", "addr", "add", l.Opts.VIP4.String()+"/32", "dev", "lo"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	start := func() *labXLB {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		x, err := startLabXLB(ctx, l, dir, rules, func(s string) { t.Log(s) })
		if err != nil {
			t.Fatal(err)
		}
		// A test that fails before its xlb stop stops the daemon before
		// the lab goes: it would log the interface's removal after the
		// test ended, which panics the test binary.
		t.Cleanup(func() { x.Stop() })
		return x
	}
	x := start()
	if res := drive(t, l, 50, 4); !res.OK() {
		t.Fatalf("before the crash: %d errors (first: %v), %d mismatched\n%s", res.Errors, res.FirstError, res.Mismatched, whereLost(t, l, x, res))
	}
	kill := func() {
		x.cmd.Process.Signal(syscall.SIGKILL)
		x.exited <- <-x.exited
		if !xdpAttached(t, l) {
			t.Fatal("after kill -9 the program is detached")
		}
	}
	kill()
	err := l.Client.Do(func() error {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(l.Opts.VIP4, l.Opts.HTTPPort).String(), 1500*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err == nil || strings.Contains(err.Error(), "refused") {
		t.Errorf("a SYN to the VIP with no daemon: %v, want a timeout (dropped, not reset)", err)
	} else {
		t.Logf("a SYN to the VIP with no daemon: %v", err)
	}
	x = start()
	waitLog(t, x, "reused_link=true")
	if res := drive(t, l, 50, 4); !res.OK() {
		t.Fatalf("after the restart over the pins: %d errors (first: %v), %d mismatched\n%s", res.Errors, res.FirstError, res.Mismatched, whereLost(t, l, x, res))
	}
	stopDaemon(t, l, x)
	entries := pinsIn(pins)
	if xdpAttached(t, l) || len(entries) > 0 {
		t.Errorf("after xlb stop: attached %v, pins %v", xdpAttached(t, l), entries)
	}

	// Crash again; xlb stop with no daemon removes the pins itself.
	x = start()
	kill()
	var out, errOut string
	l.XLB.Do(func() error {
		out, errOut, err = runXLB(t, "stop", "-c", x.config)
		return nil
	})
	entries = pinsIn(pins)
	if err != nil || xdpAttached(t, l) || len(entries) > 0 {
		t.Errorf("xlb stop without a daemon: %v %q %q; attached %v, pins %v", err, out, errOut, xdpAttached(t, l), entries)
	}
	t.Logf("xlb stop without a daemon: %s %s", strings.TrimSpace(errOut), strings.TrimSpace(out))
}

// TestEndToEndRestartBGP: with graceful restart, a restart hands the BGP
// sessions over without a withdraw: the router's route to the VIP never
// loses the appliance, connections stay, and the successor's speaker
// refreshes the routes (none left stale). xlb stop withdraws. With BFD on,
// the successor resumes the BFD sessions (same discriminators, Up), so
// the router's BFD never sees them go down.
func TestEndToEndRestartBGP(t *testing.T) {
	for _, withBFD := range []bool{false, true} {
		t.Run(fmt.Sprintf("bfd=%v", withBFD), func(t *testing.T) { testRestartBGP(t, withBFD) })
	}
}

func testRestartBGP(t *testing.T, withBFD bool) {
	l := labWith(t, lab.Options{Backends: 3, BGP: true, BFD: withBFD, XLBPinDir: bpffsDir(t), XLBGracefulRestart: 30 * time.Second})
	rules := l.DefaultRules("IPIP")[:1]
	rules[0].Health = healthNone
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	x, err := startLabXLB(ctx, l, dir, rules, func(s string) { t.Log(s) })
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stopDaemon(t, l, x) }()
	a0 := l.Appliances[0].Addr4
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	_, err = l.WaitNexthops(ctx, l.Opts.VIP4, []netip.Addr{a0})
	cancel()
	if err != nil {
		t.Fatalf("the VIP is not announced: %v\n%s", err, l.BIRDLog())
	}
	// With BFD, the router's sessions (state and since) before the hand-over.
	var bfdBefore map[string]string
	if withBFD {
		testutil.WaitFor(t, 30*time.Second, "the router's BFD sessions Up", func() (bool, string) {
			out, _ := l.Birdc("show bfd sessions")
			bfdBefore = routerBFDSessions(out)
			up := 0
			for _, v := range bfdBefore {
				if strings.HasPrefix(v, "Up ") {
					up++
				}
			}
			return up == 2 && len(bfdBefore) == 2, out
		})
	}
	ws := openWatched(t, l, l.ClientAddrs4[:50], 15*time.Second)
	stopWatch := watchAll(ws)
	// Watch the router's route every 20 ms through the hand-over.
	watch := l.WatchRoute(l.Opts.VIP4, a0, 20*time.Millisecond)
	res, err := restartXLB(t, x, "restart")
	if err != nil {
		t.Fatalf("xlb restart: %v\n%s", err, x.log)
	}
	t.Logf("xlb restart: pid %d, pause %.2f ms", res.PID, res.PauseMS)
	// The successor's own IPv4 session (the second "established" for the
	// router's address in the log) and BIRD's route no longer stale.
	v4up := "established\" component=bgp peer=" + l.Gateway4.String() + " "
	testutil.WaitFor(t, 30*time.Second, "the successor's sessions established and the route fresh", func() (bool, string) {
		out, _ := l.Birdc("show route", l.Opts.VIP4.String()+"/32", "all")
		n := strings.Count(x.log.String(), v4up)
		return n >= 2 && strings.Contains(out, a0.String()) && !strings.Contains(out, "stale"), fmt.Sprintf("%d sessions up; %q", n, out)
	})
	time.Sleep(time.Second)
	n, _, lastBad := watch.Stop()
	stopWatch()
	if n > 0 {
		t.Errorf("the router's route to the VIP lost the appliance %d times during the hand-over (last: %v)\n%s", n, lastBad, l.BIRDLog())
	}
	broken, moved, asks, detail := tally(ws)
	t.Logf("after the hand-over: %d broken, %d moved of %d (%d requests)%s", broken, moved, len(ws), asks, detail)
	if broken+moved > 0 {
		t.Errorf("%d connections broken and %d moved", broken, moved)
	}
	if !strings.Contains(x.log.String(), "bgp speaker detached for the successor") {
		t.Errorf("the predecessor did not detach its speaker:\n%s", x.log)
	}
	if withBFD && !strings.Contains(x.log.String(), "bfd session resumed from the predecessor") {
		t.Errorf("the successor did not resume the BFD sessions:\n%s", x.log)
	}
	if withBFD {
		// The router's BFD sessions never left Up: BIRD logs every change
		// (since has whole seconds only), and they are the same sessions.
		out, _ := l.Birdc("show bfd sessions")
		after := routerBFDSessions(out)
		if log := l.BIRDLog(); strings.Contains(log, "changed state from Up") || !maps.Equal(after, bfdBefore) {
			t.Errorf("the router's BFD sessions left Up during the hand-over: before %v, after %v\n%s", bfdBefore, after, log)
		}
	}
	stopDaemon(t, l, x)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.WaitNexthops(ctx, l.Opts.VIP4, nil); err != nil {
		t.Errorf("after xlb stop the VIP is still routed to the appliance: %v", err)
	}
}

// routerBFDSessions maps each session of `birdc show bfd sessions` (IP
// address, interface, state, since (date and time), …) to its state and
// since.
func routerBFDSessions(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 5 {
			if _, err := netip.ParseAddr(f[0]); err == nil {
				m[f[0]] = strings.Join(f[2:5], " ")
			}
		}
	}
	return m
}
