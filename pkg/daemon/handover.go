package daemon

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/bfd"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/engine"
	"github.com/xlbnet/xlb/pkg/handover"
	"github.com/xlbnet/xlb/pkg/neigh"
)

// stateVersion is the version of the state document this build writes;
// stateVersions the ones it reads.
const stateVersion = 1

var stateVersions = []int{1}

// stateDoc is the control plane's memory, handed to a successor: what it
// needs so that every conntrack entry in the arenas keeps its meaning
// (the slots it names, the generations it was stamped with, the clock its
// deadlines count on) and so that no backend changes eligibility because
// a process changed (health verdicts, next hops, drain deadlines).
type stateDoc struct {
	Version   int                          `json:"version"`
	Build     string                       `json:"build"`
	ClockBase int64                        `json:"clock_base"` // CLOCK_MONOTONIC ns of conntrack time 0
	Seed      uint64                       `json:"conntrack_seed"`
	Engine    engine.State                 `json:"engine"`
	Rules     map[string]uint16            `json:"rule_slots,omitempty"`    // always written (assembleDoc)
	Backends  map[string]map[string]uint32 `json:"backend_slots,omitempty"` // rule → address → slot
	Runtime   []ruleState                  `json:"rules,omitempty"`
	Probes    []probeState                 `json:"probes,omitempty"`
	NextHops  []nexthopState               `json:"next_hops,omitempty"`
	Reloads   [2]uint64                    `json:"reloads"` // ok, rejected
	// Stopped is set in the document a daemon leaves in systemd's fd store
	// when it stops for a restart (systemd.go).
	Stopped *storedStop `json:"stopped,omitempty"`
	// BFD are the speaker's BFD sessions, resumed by the successor's
	// speaker so the routers never see them go down; absent (older
	// documents, a stop): the sessions start over.
	BFD []bfd.Carried `json:"bfd,omitempty"`
}

type ruleState struct {
	Name    string          `json:"name"`
	Slot    uint16          `json:"slot"`
	Warm    bool            `json:"warm"`               // every backend had its first health verdict (warmup.go)
	Prev    json.RawMessage `json:"failover,omitempty"` // failover.State.MarshalCarry
	Removed []removedState  `json:"removed,omitempty"`
}

type removedState struct {
	Addr  netip.Addr `json:"addr"`
	At    time.Time  `json:"at"`
	Group string     `json:"group"`
}

type probeState struct {
	Rule        string               `json:"rule"`
	Addr        netip.Addr           `json:"addr"`
	Health      failover.Health      `json:"health"`
	Weight      uint32               `json:"weight"`
	WeightState failover.WeightState `json:"weight_state"`
	LastError   string               `json:"last_error,omitempty"`
	Since       time.Time            `json:"since"`
}

// stateOf is the verdict p of key k as a state document (or a cut-over)
// carries it; probe is its way back.
func stateOf(k probeKey, p probe) probeState {
	return probeState{Rule: k.rule, Addr: k.addr, Health: p.health, Weight: p.weight, WeightState: p.weightState, LastError: p.lastError, Since: p.since}
}

func (s probeState) probe() probe {
	return probe{health: s.Health, weight: s.Weight, weightState: s.WeightState, lastError: s.LastError, since: s.Since}
}

type nexthopState struct {
	Addr   netip.Addr    `json:"addr"`
	Direct bool          `json:"direct"`
	NH     neigh.NextHop `json:"nh"`
	Err    string        `json:"err,omitempty"`
}

// Names of the listeners handed over besides the engine's files.
const (
	controlFile = "control"
	metricsFile = "metrics"
)

// writeState writes the state document into a new sealed memfd, which
// the caller closes (control goroutine), and returns its size.
//
// The document's bulk is each rule's failover state and backend slots,
// and the verdicts and next hops (about 600 bytes a backend in all): they
// are kept encoded in parts (docparts.go), a bucket of rules encoded
// again only when one of its rules or verdicts changed (a rule's carried
// state once per computation of the rule; a restart encodes the missing
// ones off the control goroutine first), a bucket of next hops when one
// of them changes, and copied in as they are through a small buffer,
// straight into the memfd: a document costs about the kernel's copy of
// its bytes, not their encoding, and no buffer of its size in this
// process (BenchmarkStateDocument, TestStateDocumentFollowsChanges).
func (d *daemon) writeState(stop *storedStop) (fd, size int, err error) {
	if d.stateWriter == nil {
		d.stateWriter = bufio.NewWriterSize(nil, 1<<20)
	}
	fd, size, err = sealedMemfd("xlb-state", d.stateWriter, func(w *bufio.Writer) error { return d.stateDocument(w, stop) })
	if err != nil {
		return -1, 0, fmt.Errorf("state document: %w", err)
	}
	return fd, size, nil
}

// fdWriter writes to a descriptor, counting the bytes.
type fdWriter struct {
	fd, n int
}

func (w *fdWriter) Write(b []byte) (int, error) {
	total := 0
	for len(b) > 0 {
		n, err := unix.Write(w.fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return total, err
		}
		total, b = total+n, b[n:]
	}
	w.n += total
	return total, nil
}

// stateDocument writes the control plane's state to w (control
// goroutine), assembled from its parts as writeState says.
func (d *daemon) stateDocument(w *bufio.Writer, stop *storedStop) error {
	head, err := d.stateHead(stop)
	if err != nil {
		return err
	}
	if err := d.encodeBuckets(); err != nil {
		return err
	}
	var sections [stateBuckets]docSections
	for i := range d.docBuckets {
		sections[i] = d.bucketSections(&d.docBuckets[i])
	}
	return assembleDoc(w, head, sections[:])
}

// restoreState takes the control plane's state from a predecessor's
// document (before the first publish).
func (d *daemon) restoreState(doc *stateDoc) error {
	d.reg = newRegistry()
	for name, s := range doc.Rules {
		d.reg.rules[name] = s
		d.reg.backends[name] = map[netip.Addr]uint32{}
	}
	for rule, m := range doc.Backends {
		if d.reg.backends[rule] == nil {
			return fmt.Errorf("state document: backend slots of rule %q, which has no slot", rule)
		}
		for a, s := range m {
			addr, err := netip.ParseAddr(a)
			if err != nil {
				return fmt.Errorf("state document: backend slot of %q: %w", a, err)
			}
			d.reg.backends[rule][addr] = s
		}
	}
	for _, rs := range doc.Runtime {
		rt := &ruleRuntime{slot: rs.Slot, removed: map[netip.Addr]removedBackend{}}
		// A warm rule stays warm: its verdicts come along, and the
		// successor announces its VIPs as soon as it serves.
		if rs.Warm {
			rt.warm.warm, rt.warm.at = true, time.Now()
		}
		if len(rs.Prev) > 0 {
			st, err := failover.UnmarshalCarry(rs.Prev)
			if err != nil {
				return fmt.Errorf("state document: rule %s: %w", rs.Name, err)
			}
			rt.prev = st
			rt.carry, rt.carryOf = rs.Prev, st // as it came: the next document copies it
		}
		for _, r := range rs.Removed {
			rt.removed[r.Addr] = removedBackend{at: r.At, group: r.Group}
		}
		d.rules[rs.Name] = rt
	}
	for _, p := range doc.Probes {
		d.probes[probeKey{p.Rule, p.Addr}] = p.probe()
	}
	for _, s := range doc.NextHops {
		nh := nexthop{nh: s.NH}
		if s.Err != "" {
			nh.err = errors.New(s.Err)
		}
		d.nexthops[nhKey{s.Addr, s.Direct}] = nh
	}
	d.bfdCarried = doc.BFD
	d.reloadsOK.Store(doc.Reloads[0])
	d.reloadsRejected.Store(doc.Reloads[1])
	d.resetDocBuckets()
	return nil
}

// cutoverBody is what the predecessor's stopped workers hand over, and
// its BFD sessions as they are at the cut-over: the state document's
// copy is as old as the successor's preparation (seconds on a busy
// machine), and a session the router restarted meanwhile has another
// discriminator there. Absent (an older predecessor): the document's.
//
// Probes are the health verdicts the predecessor applied since it offered
// its state document, and the reports its checker made that it has not
// applied yet (carriedVerdicts): the successor starts its probers only
// now, from the document's verdicts overlaid with these. They are a
// []probeState encoded before the workers stop and decoded after the
// successor's resume, so a long list (a restart during a first round of
// checks) does not lengthen the pause.
//
// Reload says a SIGHUP reached the predecessor while the successor
// prepared: the successor reloads once it serves, since it may have read
// the files before they changed.
type cutoverBody struct {
	Free   engine.FreeFrames `json:"free"` // queue → free UMEM chunks
	BFD    []bfd.Carried     `json:"bfd,omitempty"`
	Probes json.RawMessage   `json:"probes,omitempty"`
	Reload bool              `json:"reload,omitempty"`
	// StoreNames are the state document's files the predecessor left in
	// systemd's fd store, and StoreGen their newest generation: the
	// successor's first store removes them and writes later
	// generations (statestore.go). Absent (an older predecessor): its
	// single "state" file is removed.
	StoreNames []string `json:"store_names,omitempty"`
	StoreGen   uint64   `json:"store_gen,omitempty"`
}

// restartPrepareLimit bounds the successor's preparation, from the offer
// to READY. This daemon serves on meanwhile, its control goroutine
// included, so the limit only has to tell a stuck successor from a slow
// one: preparing 1000 rules of 100 backends took over 60 s in a cgroup of
// 40 % of one CPU.
const restartPrepareLimit = 5 * time.Minute

// restartUnderWay is a hand-over in progress, from the request to its
// end. The waits (the successor's start, its preparation) run on a
// goroutine of their own (driveHandOver); the steps that read or change
// the daemon's state (the offer, the cut-over, a failure) on the control
// goroutine, which serves on in between: health verdicts are applied and
// published as ever, reads are answered, and what would change the state
// document already offered (a reload, a CLI change, an appliance drain)
// is refused (restartGuard), except a SIGHUP, which the successor
// performs after the cut-over. Owned by the control goroutine.
type restartUnderWay struct {
	started time.Time
	p       *handover.Predecessor
	pid     int
	build   string
	version int // the state document's version offered
	// changed are the verdicts applied since the state document was
	// offered (nil before): they travel with the cut-over.
	changed map[probeKey]struct{}
	// reload: a SIGHUP came meanwhile.
	reload bool
	answer chan restartAnswer // buffered: whoever asked reads it
}

type restartAnswer struct {
	res *control.RestartResult
	err error
}

// restartGuard refuses a change while a restart is under way (nil when
// none is): the successor prepares from a state document that would
// not have it.
func (d *daemon) restartGuard(what string) error {
	r := d.restart
	if r == nil {
		return nil
	}
	return control.Errorf(409, "%s: a restart is under way (since %s, successor pid %d); this daemon serves meanwhile: try again when it is done",
		what, r.started.Format("15:04:05"), r.pid)
}

// beginHandOver starts a restart (control goroutine); its answer comes on
// the channel returned. A restart asked while one is under way is
// refused.
func (d *daemon) beginHandOver(req control.RestartRequest) <-chan restartAnswer {
	answer := make(chan restartAnswer, 1)
	if err := d.restartGuard("restart"); err != nil {
		answer <- restartAnswer{err: err}
		return answer
	}
	path := req.Binary
	if path == "" {
		// The running executable itself, even if its file was replaced.
		path = "/proc/self/exe"
	}
	args := append([]string{"run", "-c", req.Config}, d.opts.SuccessorArgs...)
	d.log.Info("hand-over: starting the successor", "binary", path, "config", req.Config)
	p, err := handover.Launch(handover.Options{Path: path, Args: args, Env: os.Environ(), Stdout: os.Stdout, Stderr: os.Stderr,
		Timeouts: handover.Timeouts{Prepare: restartPrepareLimit}})
	if err != nil {
		d.log.Error("hand-over failed; this daemon keeps serving", "err", err)
		answer <- restartAnswer{err: control.Errorf(409, "restart: %v (this daemon keeps serving)", err)}
		return answer
	}
	r := &restartUnderWay{started: time.Now(), p: p, pid: p.PID(), answer: answer}
	d.restart = r
	go d.driveHandOver(r)
	return answer
}

// driveHandOver waits for the successor's start and preparation off the
// control goroutine and runs each step that follows on it. When the
// control loop has ended meanwhile (the daemon stops), it abandons the
// successor itself.
func (d *daemon) driveHandOver(r *restartUnderWay) {
	p := r.p
	// onControl runs f on the control goroutine while r is the restart
	// under way; once it is not (xlb stop abandoned it) or the control
	// loop has ended, the successor is abandoned here and false returned.
	onControl := func(f func()) bool {
		current := false
		err := d.do(context.Background(), func() {
			if current = d.restart == r; current {
				f()
			}
		})
		if err != nil || !current {
			p.Abandon()
			return false
		}
		return true
	}
	fail := func(err error) { onControl(func() { d.failHandOver(r, err) }) }
	// The rules' carried failover states are the bulk of the state
	// document: encoded here, while the successor starts, the offer on
	// the control goroutine only splices them (a State is never changed
	// once computed; a rule computed again meanwhile is encoded there).
	var carries []pendingCarry
	if !onControl(func() { carries = d.unencodedCarries() }) {
		return
	}
	encodeCarries(carries)
	hello, err := p.WaitHello()
	helloAt := time.Now()
	if err != nil {
		fail(err)
		return
	}
	var parts offerParts
	ok := onControl(func() {
		installCarries(carries)
		if parts, err = d.prepareOffer(r, hello); err != nil {
			d.failHandOver(r, err)
		}
	})
	if !ok || err != nil {
		return
	}
	// Sent from here: the successor reads the files as it starts, and a
	// busy one takes its time.
	t0 := time.Now()
	if parts.stateFD >= 0 {
		err = p.OfferSealed(parts.version, parts.stateFD, parts.reason, parts.files)
	} else {
		err = p.Offer(parts.version, nil, parts.reason, parts.files) // no version in common: no document
	}
	for _, fd := range parts.own {
		unix.Close(fd)
	}
	if err != nil {
		fail(err)
		return
	}
	d.log.Info("hand-over: the successor prepares; this daemon serves meanwhile", "pid", hello.PID, "build", hello.Build,
		"hello_after", helloAt.Sub(r.started).Round(time.Millisecond).String(), "document", parts.took.Round(time.Millisecond).String(),
		"offer", time.Since(t0).Round(time.Millisecond).String(), "state_bytes", parts.docBytes)
	notes, err := p.WaitReady()
	if err != nil {
		fail(err)
		return
	}
	onControl(func() { d.cutover(r, notes) })
}

// pendingCarry is a rule's failover state whose carried form the state
// document has not encoded yet, and that form once encoded.
type pendingCarry struct {
	rt  *ruleRuntime // read and written on the control goroutine only
	st  *failover.State
	b   []byte
	err error
}

// unencodedCarries lists the rules whose carried state is not encoded
// (control goroutine).
func (d *daemon) unencodedCarries() []pendingCarry {
	var out []pendingCarry
	for _, rt := range d.rules {
		if rt.prev != nil && rt.carryOf != rt.prev {
			out = append(out, pendingCarry{rt: rt, st: rt.prev})
		}
	}
	return out
}

// encodeCarries encodes each pending state, on up to one goroutine per
// CPU; it reads the States only, never the rules (any goroutine).
func encodeCarries(cs []pendingCarry) {
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range min(runtime.GOMAXPROCS(0), len(cs)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(cs)); i = next.Add(1) - 1 {
				cs[i].b, cs[i].err = cs[i].st.MarshalCarry()
			}
		})
	}
	wg.Wait()
}

// installCarries keeps each encoded state for its rule's state
// documents, unless the rule was computed again since (control
// goroutine).
func installCarries(cs []pendingCarry) {
	for _, c := range cs {
		if c.err == nil && c.rt.prev == c.st {
			c.rt.carry, c.rt.carryOf = c.b, c.st
		}
	}
}

// offerParts is what the control goroutine prepares for the offer, and
// the hand-over's goroutine sends: the state document, the files, and
// the duplicates among them it closes once they are sent.
type offerParts struct {
	version  int
	stateFD  int // the document's sealed memfd, -1 without one
	docBytes int
	reason   string
	files    []handover.File
	own      []int         // the listeners' duplicates and the memfd
	took     time.Duration // writing the document
}

// prepareOffer writes the state document and lists the files for the
// successor that said hello (control goroutine). From here the verdicts
// this daemon applies are recorded for the cut-over.
func (d *daemon) prepareOffer(r *restartUnderWay, hello handover.Hello) (offerParts, error) {
	t0 := time.Now()
	r.build = hello.Build
	o := offerParts{version: handover.ChooseState(stateVersions, hello.States), stateFD: -1}
	if o.version == stateVersion {
		var err error
		if o.stateFD, o.docBytes, err = d.writeState(nil); err != nil {
			return o, err
		}
		o.own = append(o.own, o.stateFD)
	} else {
		o.reason = fmt.Sprintf("the successor reads state versions %v, this daemon writes %d", hello.States, stateVersion)
	}
	// The engine's files stay open while it serves, which it does until
	// the cut-over.
	o.files = d.engine.Files()
	for _, l := range []struct {
		name string
		ln   net.Listener
	}{{controlFile, d.controlLn}, {metricsFile, d.metricsLn}} {
		if l.ln == nil {
			continue
		}
		fd, err := listenerFD(l.ln)
		if err != nil {
			d.log.Warn("hand-over: the successor opens its own listener", "listener", l.name, "err", err)
			continue
		}
		o.files = append(o.files, handover.File{Name: l.name, FD: fd})
		o.own = append(o.own, fd)
	}
	r.version, r.changed = o.version, map[probeKey]struct{}{}
	o.took = time.Since(t0)
	return o, nil
}

// failHandOver ends a restart that failed before the cut-over (control
// goroutine): the successor, if any, is killed, and this daemon serves on
// as if nothing happened, performing a reload a SIGHUP asked meanwhile.
func (d *daemon) failHandOver(r *restartUnderWay, err error) {
	r.p.Abandon()
	d.restart = nil
	d.log.Error("hand-over failed; this daemon keeps serving", "err", err)
	r.answer <- restartAnswer{err: control.Errorf(409, "restart: %v (this daemon keeps serving)", err)}
	if r.reload {
		d.log.Info("reloading, as SIGHUP asked during the restart")
		if _, err := d.Reload(false); err != nil {
			d.log.Error("reload rejected; the running configuration keeps serving", "err", err)
		}
	}
}

// abandonHandOver ends a restart under way when the daemon stops: the
// successor is killed.
func (d *daemon) abandonHandOver(why string) {
	r := d.restart
	if r == nil {
		return
	}
	r.p.Abandon()
	d.restart = nil
	d.log.Warn("hand-over abandoned: the daemon stops", "why", why)
	r.answer <- restartAnswer{err: control.Errorf(409, "restart abandoned: the daemon stops (%s)", why)}
}

// cutover stops the workers and hands them to the successor that is ready
// (control goroutine). On success the daemon must exit without detaching
// (d.exit is set); on a refusal it serves on as if nothing happened.
func (d *daemon) cutover(r *restartUnderWay, notes []string) {
	p := r.p
	fail := func(err error) { d.failHandOver(r, err) }
	begin := time.Now()
	// From here the successor resumes the BFD sessions before it says
	// DONE, and may take the router's BFD packets (bgp.go holdBFD).
	d.holdBFD(true)
	var bfdNow []bfd.Carried
	if b := d.bgp.Load(); b != nil {
		bfdNow = b.speaker.BFDExport()
	}
	var carried json.RawMessage
	if ps := d.carriedVerdicts(r); len(ps) > 0 {
		var err error
		if carried, err = json.Marshal(ps); err != nil {
			d.holdBFD(false)
			fail(err)
			return
		}
	}
	free := d.engine.Quiesce()
	body := cutoverBody{Free: free, BFD: bfdNow, Probes: carried, Reload: r.reload, StoreNames: d.stateStore.names(), StoreGen: d.stateStore.gen}
	if err := p.Cutover(body); err != nil {
		d.holdBFD(false)
		if handover.IsRefused(err) {
			d.engine.Resume()
			fail(err)
			return
		}
		// The successor may have started driving the rings: it is killed
		// and this daemon serves again on new sockets.
		p.Abandon()
		d.restart = nil
		d.log.Error("hand-over: the successor vanished after the cut-over; rebuilding the sockets", "err", err)
		if rerr := d.engine.Rebuild(); rerr != nil {
			d.log.Error("rebuild after a failed hand-over; stopping", "err", rerr)
			d.exit = exitStop
			r.answer <- restartAnswer{err: control.Errorf(500, "restart: %v; rebuilding the sockets failed too: %v", err, rerr)}
			return
		}
		r.answer <- restartAnswer{err: control.Errorf(500, "restart: %v (this daemon serves again, on new sockets)", err)}
		return
	}
	pause := time.Since(begin)
	// The successor runs the BFD sessions and starts its own speaker once
	// it serves: this one goes first, without a withdraw (bgp.go).
	d.detachBGP()
	p.Close()
	d.restart = nil
	d.exit = exitHandedOver
	// The successor accepts on the control socket now. This process stops
	// accepting before its answer leaves, so a command sent after the
	// restart returned reaches the successor, not a daemon on its way out
	// (its fd only: the socket and its path stay the successor's).
	if d.controlLn != nil {
		d.controlLn.Close()
	}
	res := &control.RestartResult{PID: r.pid, Build: r.build, StateVersion: r.version, Queues: len(free), PauseMS: float64(pause.Microseconds()) / 1000, CutoverAt: begin, Notes: notes}
	d.log.Info("hand-over done: the successor serves; exiting without detaching", "pid", r.pid, "build", r.build, "pause", pause.String(), "prepared", begin.Sub(r.started).Round(time.Millisecond).String())
	r.answer <- restartAnswer{res: res}
}

// listenerFD returns a duplicate of ln's socket. A unix listener is told
// not to remove its path when it closes: the successor serves it. (Not
// through File and Fd: Fd puts the socket, which the duplicate shares
// with ln, in blocking mode, and a blocking accept would keep this
// process's server from shutting down, and take one of the successor's
// connections.)
func listenerFD(ln net.Listener) (int, error) {
	if ul, ok := ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false)
	}
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return -1, fmt.Errorf("listener %T cannot be handed over", ln)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	nfd, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) {
		nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	return nfd, derr
}

// buildID identifies the running build: the Go build ID the linker
// writes into the executable's .note.go.buildid note (a hash of its
// inputs: two builds that differ in any way differ here), read without
// hashing the file, which would cost the successor CPU while its
// predecessor forwards.
func buildID() string {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sec := f.Section(".note.go.buildid")
	if sec == nil {
		return "unknown"
	}
	note, err := sec.Data()
	// An ELF note: namesz, descsz, type (4 bytes each), "Go\x00\x00", desc.
	if err != nil || len(note) < 16 {
		return "unknown"
	}
	descsz := binary.LittleEndian.Uint32(note[4:])
	if 16+int(descsz) > len(note) {
		return "unknown"
	}
	id := string(note[16 : 16+descsz])
	// action ID/…/content ID: the last part names the content.
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	return id
}
