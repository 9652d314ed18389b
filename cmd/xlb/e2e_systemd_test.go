package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/sdnotify/sdnotifytest"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// fakeSystemd plays the parts of systemd the daemon talks to: the
// notification socket (READY, MAINPID, STOPPING) with its file descriptor
// store (FDSTORE, FDSTOREREMOVE: pkg/sdnotify/sdnotifytest), and a start
// that passes the store's fds as LISTEN_FDS with their names. (A real
// systemd cannot run as PID 1 in this test environment; the unit itself
// is checked by TestSystemdUnitCommands.)
type fakeSystemd struct {
	*sdnotifytest.Manager
}

func newFakeSystemd(t *testing.T) *fakeSystemd {
	t.Helper()
	m, err := sdnotifytest.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return &fakeSystemd{m}
}

// names lists the store's content, the state document's files as one
// name: "state" when they are one manifest (state-m-<gen>) and exactly
// the parts it names, each there once; otherwise "state?" and what is
// wrong.
func (s *fakeSystemd) names() []string {
	var out []string
	s.With(func(store []sdnotifytest.Stored) []sdnotifytest.Stored {
		out = storeNames(store)
		return store
	})
	return out
}

// storeNames is names of a store's content (under the manager's lock).
func storeNames(store []sdnotifytest.Stored) []string {
	var out []string
	parts := map[string]int{}
	var manifests []int
	for _, f := range store {
		switch {
		case strings.HasPrefix(f.Name, "state-m-"):
			manifests = append(manifests, f.FD)
		case strings.HasPrefix(f.Name, "state-"):
			parts[f.Name]++
		default:
			out = append(out, f.Name)
		}
	}
	switch {
	case len(manifests) == 0 && len(parts) == 0:
	case len(manifests) != 1:
		out = append(out, fmt.Sprintf("state? %d manifests, %d parts", len(manifests), len(parts)))
	default:
		var m struct {
			Parts []struct{ Name string } `json:"parts"`
		}
		var st unix.Stat_t
		unix.Fstat(manifests[0], &st)
		b := make([]byte, st.Size)
		unix.Pread(manifests[0], b, 0)
		if err := json.Unmarshal(b, &m); err != nil {
			out = append(out, "state? manifest: "+err.Error())
			break
		}
		named := map[string]int{}
		for _, p := range m.Parts {
			named[p.Name]++
		}
		if !maps.Equal(named, parts) {
			out = append(out, fmt.Sprintf("state? the manifest names %d parts, the store holds %d", len(named), len(parts)))
			break
		}
		out = append(out, "state")
	}
	slices.Sort(out)
	return out
}

// toWholeDocument replaces the state document's parts in the store by
// the document they make in one memfd named "state", as a build before
// the parts stored it (pkg/daemon statestore.go): the head without its
// closing brace, then the buckets' rule slots, verdicts, next hops,
// backend slots and rules, each list joined by commas.
func (s *fakeSystemd) toWholeDocument(t *testing.T) {
	t.Helper()
	s.With(func(store []sdnotifytest.Stored) []sdnotifytest.Stored {
		return wholeDocument(t, store)
	})
}

// wholeDocument is toWholeDocument's work on the store (under the
// manager's lock).
func wholeDocument(t *testing.T, store []sdnotifytest.Stored) []sdnotifytest.Stored {
	read := func(fd int) []byte {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, st.Size)
		if _, err := unix.Pread(fd, b, 0); err != nil && st.Size > 0 {
			t.Fatal(err)
		}
		return b
	}
	files := map[string]int{}
	var manifest []byte
	for _, f := range store {
		files[f.Name] = f.FD
		if strings.HasPrefix(f.Name, "state-m-") {
			manifest = read(f.FD)
		}
	}
	var m struct {
		Parts []struct {
			Name  string
			Sizes []int
		} `json:"parts"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil || len(m.Parts) < 1 {
		t.Fatalf("the store's manifest %q: %v", manifest, err)
	}
	var sections [][]byte
	for _, p := range m.Parts {
		fd, ok := files[p.Name]
		if !ok {
			t.Fatalf("part %s not in the store", p.Name)
		}
		b := read(fd)
		for _, n := range p.Sizes {
			sections, b = append(sections, b[:n]), b[n:]
		}
	}
	join := func(open string, which int) string {
		var items []string
		for i := 1 + which; i < len(sections); i += 5 {
			if len(sections[i]) > 0 {
				items = append(items, string(sections[i]))
			}
		}
		return open + strings.Join(items, ",")
	}
	head := sections[0]
	doc := string(head[:len(head)-1]) + join(`,"rule_slots":{`, 0) + join(`},"probes":[`, 3) + join(`],"next_hops":[`, 4) +
		join(`],"backend_slots":{`, 1) + join(`},"rules":[`, 2) + "]}"
	fd, err := unix.MemfdCreate("state", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(fd, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	store = slices.DeleteFunc(store, func(f sdnotifytest.Stored) bool {
		if strings.HasPrefix(f.Name, "state-") {
			unix.Close(f.FD)
			return true
		}
		return false
	})
	return append(store, sdnotifytest.Stored{Name: "state", FD: fd})
}

// start runs xlb as the unit would, with the store's fds.
func (s *fakeSystemd) start(t *testing.T, l *lab.Lab, dir string, rules []lab.Rule) *labXLB {
	t.Helper()
	var files []*os.File
	var names []string
	var dupErr error
	s.With(func(store []sdnotifytest.Stored) []sdnotifytest.Stored {
		for _, f := range store {
			d, err := unix.Dup(f.FD)
			if err != nil {
				dupErr = err
				break
			}
			files = append(files, os.NewFile(uintptr(d), f.Name))
			names = append(names, f.Name)
		}
		return store
	})
	if dupErr != nil {
		t.Fatal(dupErr)
	}
	env := []string{"NOTIFY_SOCKET=" + s.Path}
	if len(files) > 0 {
		env = append(env, fmt.Sprintf("LISTEN_FDS=%d", len(files)), "LISTEN_FDNAMES="+strings.Join(names, ":"))
	}
	cfg, err := l.WriteConfig(dir, rules)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x, err := runLabXLBWith(ctx, l.XLB.Name, dir, cfg, func(line string) { t.Log(line) }, labStart{Env: env, Files: files, ListenPID: len(files) > 0})
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "READY=1 from the daemon", func() (bool, string) {
		return s.Ready(x.cmd.Process.Pid), strings.Join(s.Log(), "; ")
	})
	return x
}

// TestEndToEndSystemd drives the systemd paths with the fake manager:
// SIGTERM stores sockets, rings and tables and the next start takes them
// over (systemctl restart); after SIGKILL the next start keeps the
// conntrack tables and state from the store and binds new sockets, from
// the document's parts as from the whole document of a build before the
// parts (an upgrade after a crash); xlb
// restart makes the successor the main process; xlb stop empties the
// store. Connections opened before a fourth backend was added survive
// all of it on their backends.
func TestEndToEndSystemd(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 4, XLBPinDir: bpffsDir(t)})
	rules := l.DefaultRules("IPIP")[:1]
	rules[0].Health = healthNone
	rules[0].Backends = []int{0, 1, 2}
	sd := newFakeSystemd(t)
	dir := t.TempDir()
	x := sd.start(t, l, dir, rules)
	defer func() { stopDaemon(t, l, x) }()
	want := []string{"ct-fragments", "ct-q0", "ct-q1", "ct-sessions", "state"}
	if got := sd.names(); !slices.Equal(got, want) {
		t.Errorf("while serving the store holds %v, want %v", got, want)
	}
	ws := openWatched(t, l, l.ClientAddrs4[:100], 15*time.Second)
	rules[0].Backends = []int{0, 1, 2, 3}
	if _, err := l.WriteConfig(dir, rules); err != nil {
		t.Fatal(err)
	}
	if err := x.Reload(); err != nil {
		t.Fatal(err)
	}
	waitLog(t, x, "msg=reloaded")
	stopWatch := watchAll(ws)
	defer stopWatch()
	// Each phase's check waits until every connection answered again
	// (a request waiting out the gap may take up to its 15 s), so the next
	// phase starts with none of them in TCP's backoff.
	check := func(phase string) {
		t.Helper()
		waiting := awaitAnswers(ws, time.Now(), 20*time.Second)
		broken, moved, asks, detail := tally(ws)
		t.Logf("%s: %d of %d connections broken, %d moved, %d without an answer for 20 s (%d requests so far)%s", phase, broken, len(ws), moved, waiting, asks, detail)
		if broken+moved+waiting > 0 {
			t.Errorf("%s: %d connections broken, %d moved and %d without an answer, want none", phase, broken, moved, waiting)
		}
	}

	// systemctl restart: SIGTERM, then a start with the store.
	begin := time.Now()
	x.cmd.Process.Signal(syscall.SIGTERM)
	x.exited <- <-x.exited
	want = []string{"ct-fragments", "ct-q0", "ct-q1", "ct-sessions", "state", "umem-q0", "umem-q1", "xsk-q0", "xsk-q1"}
	if got := sd.names(); !slices.Equal(got, want) {
		t.Errorf("after SIGTERM the store holds %v, want %v", got, want)
	}
	if !xdpAttached(t, l) {
		t.Error("SIGTERM under systemd detached the program")
	}
	x = sd.start(t, l, dir, rules)
	t.Logf("systemctl restart: %v from SIGTERM to READY of the new process", time.Since(begin).Round(time.Millisecond))
	waitLog(t, x, "sockets, rings and tables taken over")
	testutil.WaitFor(t, 5*time.Second, "sockets out of the store again", func() (bool, string) {
		got := sd.names()
		return slices.Equal(got, []string{"ct-fragments", "ct-q0", "ct-q1", "ct-sessions", "state"}), fmt.Sprint(got)
	})
	check("after systemctl restart")

	// A crash: SIGKILL, then a start with the arenas and the state.
	x.cmd.Process.Signal(syscall.SIGKILL)
	x.exited <- <-x.exited
	x = sd.start(t, l, dir, rules)
	waitLog(t, x, "after a crash: new sockets, conntrack tables and state kept")
	waitLog(t, x, "conntrack table kept from the previous process")
	check("after a crash and a restart")

	// An upgrade after a crash: the store holds the whole document a
	// build before the parts stored; the start takes it, and its first
	// store replaces it by parts.
	x.cmd.Process.Signal(syscall.SIGKILL)
	x.exited <- <-x.exited
	sd.toWholeDocument(t)
	x = sd.start(t, l, dir, rules)
	waitLog(t, x, "after a crash: new sockets, conntrack tables and state kept")
	testutil.WaitFor(t, 5*time.Second, "the whole document replaced by parts", func() (bool, string) {
		got := sd.names()
		return slices.Equal(got, []string{"ct-fragments", "ct-q0", "ct-q1", "ct-sessions", "state"}), fmt.Sprint(got)
	})
	check("after a crash and an upgrade from the whole document")

	// xlb restart under systemd: the successor becomes the main process.
	res, err := restartXLB(t, x, "restart")
	if err != nil {
		t.Fatalf("xlb restart: %v", err)
	}
	testutil.WaitFor(t, 5*time.Second, "MAINPID of the successor", func() (bool, string) {
		return sd.MainPID() == res.PID && sd.Ready(res.PID), fmt.Sprintf("main pid %d", sd.MainPID())
	})
	testutil.WaitFor(t, 5*time.Second, "the predecessor's state document out of the store", func() (bool, string) {
		got := sd.names()
		return slices.Equal(got, []string{"ct-fragments", "ct-q0", "ct-q1", "ct-sessions", "state"}), fmt.Sprint(got)
	})
	check("after xlb restart")
	stopWatch()

	stopDaemon(t, l, x)
	testutil.WaitFor(t, 5*time.Second, "store emptied by xlb stop", func() (bool, string) {
		got := sd.names()
		return len(got) == 0, fmt.Sprint(got)
	})
}

// TestSystemdUnitHandsOver: the unit lets the daemon outlive its process
// as pkg/daemon expects (notify type, MAINPID from a successor, an fd
// store), and systemd-analyze, where installed, finds nothing to say
// about it.
func TestSystemdUnitHandsOver(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/systemd/xlb.service")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = v
		}
	}
	for k, want := range map[string]string{"Type": "notify", "NotifyAccess": "all", "Restart": "on-failure"} {
		if keys[k] != want {
			t.Errorf("%s=%s, want %s", k, keys[k], want)
		}
	}
	// The state document is 65 parts and a manifest (pkg/daemon
	// statestore.go), twice while a first store replaces another
	// process's.
	if n, err := strconv.Atoi(keys["FileDescriptorStoreMax"]); err != nil || n < 3*256+2+2*66 {
		t.Errorf("FileDescriptorStoreMax=%s: want room for 3 fds per queue (256 queues), 2 more and twice the state document's 66", keys["FileDescriptorStoreMax"])
	}
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Logf("systemd-analyze not installed: the unit's syntax is not checked by systemd")
		return
	}
	// verify wants the executables to exist: point them at the test binary.
	self, _ := os.Executable()
	path := filepath.Join(t.TempDir(), "xlb.service")
	os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/xlb", self)), 0o644)
	out, _ := exec.Command(tool, "verify", path).CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, "xlb.service") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
}
