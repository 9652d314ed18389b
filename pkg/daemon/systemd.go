package daemon

import (
	"encoding/json"
	"os"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/engine"
	"github.com/xlbnet/xlb/pkg/sdnotify"
)

// Under systemd (Type=notify, FileDescriptorStoreMax=): what outlives the
// process there is in systemd's file descriptor store.
//
//   - While serving: the conntrack arenas (ct-q<N>, ct-sessions,
//     ct-fragments) and the state document in parts (statestore.go:
//     sealed memfds named state-<part>-<generation> and a manifest,
//     each publication storing the parts that changed). After a crash systemd starts the
//     daemon again with them (LISTEN_FDS): it binds new sockets (whatever
//     the dead process held on its rings is lost; the pinned program drops
//     VIP packets meanwhile), adopts the arenas (recounted: the clean flag
//     is not set), restores the registry and the rest of the control
//     plane's state from the document and drops every entry naming a slot
//     the registry does not know before a worker runs.
//   - On SIGTERM (systemctl stop or restart): the workers stop between two
//     batches, the sockets and their UMEM memfds (xsk-q<N>, umem-q<N>) go
//     to the store too, and the document gets the free frame lists: the
//     next start takes the rings over as a successor would (packets that
//     arrived meanwhile wait on the RX rings, 2048 per queue; beyond that
//     the kernel drops), then removes the sockets from the store. Nothing
//     is detached: until that start the program drops VIP packets, and
//     `xlb stop` removes it all (and empties the store).
//   - `xlb restart` under systemd: the successor tells systemd it is the
//     main process now (MAINPID=, NotifyAccess=all) before the predecessor
//     exits; the store already holds the same arenas.
//
// The fd store keeps fds only while the unit is active or restarting;
// `systemctl stop` then `start` keeps them only with
// FileDescriptorStorePreserve=yes (systemd 254).

// stateFile is the name of the state document a build before the parts
// stored whole: still read (an upgrade starts from it) and removed.
const stateFile = "state"

// storedStop is the part of the state document written at a stop into
// the fd store: what the stopped workers handed over.
type storedStop struct {
	Free engine.FreeFrames `json:"free"`
}

// fromStore is what systemd passed this process from its fd store.
type fromStore struct {
	files map[string]int
	doc   *stateDoc
	// stateNames are the state document's files in the store (every
	// generation found), removed once this process stored its own;
	// stateGen the highest generation among them.
	stateNames []string
	stateGen   uint64
}

func (s *fromStore) take(name string) (int, bool) {
	if s == nil {
		return -1, false
	}
	fd, ok := s.files[name]
	if ok {
		delete(s.files, name)
	}
	return fd, ok
}

// close closes what nobody took.
func (s *fromStore) close() {
	if s == nil {
		return
	}
	for name, fd := range s.files {
		unix.Close(fd)
		delete(s.files, name)
	}
}

// loadStore reads the fds systemd passed (none without a service manager)
// and the state document among them. A document this build cannot read
// is logged and ignored: the start is then cold.
func loadStore(log interface{ Warn(string, ...any) }) (*fromStore, error) {
	files, err := sdnotify.Inherited()
	if err != nil || len(files) == 0 {
		return nil, err
	}
	s := &fromStore{files: map[string]int{}}
	for _, f := range files {
		if old, dup := s.files[f.Name]; dup {
			unix.Close(old)
		}
		s.files[f.Name] = f.FD
	}
	stored := map[string]int{} // the state document's files
	for name, fd := range s.files {
		if isStateFile(name) {
			stored[name] = fd
			delete(s.files, name)
			s.stateNames = append(s.stateNames, name)
			s.stateGen = max(s.stateGen, partGen(name))
		}
	}
	if len(stored) > 0 {
		b, from, skipped := readStoredDoc(stored)
		for name, fd := range stored {
			unix.Close(fd)
			delete(stored, name)
		}
		for _, why := range skipped {
			log.Warn("fd store: a state document passed over", "why", why)
		}
		var doc stateDoc
		switch {
		case b == nil:
			log.Warn("fd store: no complete state document; starting cold")
		case json.Unmarshal(b, &doc) != nil || doc.Version != stateVersion:
			log.Warn("fd store: state document of another version; starting cold", "version", doc.Version, "from", from)
		default:
			s.doc = &doc
		}
	}
	return s, nil
}

func readFD(fd int) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	b := make([]byte, st.Size)
	if _, err := unix.Pread(fd, b, 0); err != nil && st.Size > 0 {
		return nil, err
	}
	return b, nil
}

// underSystemd reports whether a service manager listens for
// notifications (Type=notify).
func underSystemd() bool { return os.Getenv(sdnotify.EnvSocket) != "" }

// notify sends a notification, logging a failure.
func (d *daemon) notify(state string) {
	if _, err := sdnotify.Notify(state); err != nil {
		d.log.Warn("notify the service manager", "err", err)
	}
}

// storeArenas puts the conntrack arenas in the fd store (serving).
func (d *daemon) storeArenas() {
	if !underSystemd() {
		return
	}
	for _, f := range d.engine.ArenaFiles() {
		d.storeFD(f.Name, f.FD)
	}
}

func (d *daemon) storeFD(name string, fd int) {
	if _, err := sdnotify.Remove(name); err != nil {
		d.log.Warn("fd store", "name", name, "err", err)
	}
	if _, err := sdnotify.Store(name, fd); err != nil {
		d.log.Warn("fd store", "name", name, "err", err)
	}
}

// storeState stores the state document in the fd store, with stop (the
// stopped workers' hand-over) when the daemon stops for a restart: the
// parts that changed since the last store (storeParts).
func (d *daemon) storeState(stop *storedStop) {
	if !underSystemd() || d.engine.Preparing() {
		return // a successor preparing: its predecessor's document stands
	}
	if _, err := d.storeParts(systemdStore{}, stop); err != nil {
		d.log.Warn("fd store: state document", "err", err)
	}
}

// storeForRestart is SIGTERM under systemd: stop the workers between two
// batches and store the sockets, their UMEM and the document with the
// free frame lists, so the next start takes the rings over.
func (d *daemon) storeForRestart() {
	free := d.engine.Quiesce()
	for _, f := range d.engine.SocketFiles() {
		d.storeFD(f.Name, f.FD)
	}
	d.storeState(&storedStop{Free: free})
	d.log.Info("stopped for a restart: sockets, arenas and state in systemd's fd store; nothing detached")
}

// clearStore empties the fd store (xlb stop: the next start is cold).
func (d *daemon) clearStore() {
	if !underSystemd() {
		return
	}
	for _, n := range append(append([]string{stateFile}, d.stateStore.names()...), d.engine.FileNames()...) {
		if _, err := sdnotify.Remove(n); err != nil {
			d.log.Warn("fd store", "name", n, "err", err)
		}
	}
}

// startFromStore starts the data plane from what systemd's fd store
// passed: after a stop for a restart, the sockets and rings as they were
// (a warm start); after a crash, the arenas and the state (the engine is
// then started by engine.Start with them). It restores the control
// plane's state from the document. Without a store it does nothing.
func (d *daemon) startFromStore() error {
	doc := d.storeDoc()
	if doc == nil {
		return nil
	}
	d.clock = newClockAt(doc.ClockBase)
	d.seed = doc.Seed
	if err := d.restoreState(doc); err != nil {
		d.log.Warn("fd store: state not restored; starting cold", "err", err)
		d.reg, d.rules = newRegistry(), map[string]*ruleRuntime{}
		d.probes, d.nexthops = map[probeKey]probe{}, map[nhKey]nexthop{}
		d.resetDocBuckets()
		d.clock, d.seed = newClock(), randomSeed()
		d.store.close()
		d.store = nil
		return nil
	}
	if doc.Stopped != nil {
		e, notes, err := engine.Adopt(d.engineConfig(), doc.Engine, d.store.take)
		if err == nil {
			if err = e.TakeOver(doc.Stopped.Free); err != nil {
				e.Release()
			}
		}
		if err != nil {
			// The arenas went with the failed attempt: start cold.
			d.log.Warn("fd store: the rings of the stopped daemon cannot be taken over; starting with new sockets and empty tables", "err", err)
			d.store.close()
			d.store = nil
			d.removeStoredSockets(doc)
			return nil
		}
		for _, n := range notes {
			d.log.Warn("fd store", "note", n)
		}
		e.Begin()
		d.engine = e
		d.removeStoredSockets(doc)
		d.log.Info("started from systemd's fd store: the stopped daemon's sockets, rings and tables taken over", "queues", e.Queues())
		return nil
	}
	// A crash: sockets are not reused (their rings' state died with the
	// process); stored ones, if any, are dropped first so the queues can
	// be bound again.
	d.removeStoredSockets(doc)
	d.log.Info("started from systemd's fd store after a crash: new sockets, conntrack tables and state kept")
	return nil
}

// storeDoc returns the store's state document, nil without one.
func (d *daemon) storeDoc() *stateDoc {
	if d.store == nil {
		return nil
	}
	return d.store.doc
}

// removeStoredSockets takes the sockets and UMEM memfds out of systemd's
// store and closes this process's copies not in use.
func (d *daemon) removeStoredSockets(doc *stateDoc) {
	for _, name := range doc.Engine.SocketFileNames() {
		if fd, ok := d.store.take(name); ok {
			unix.Close(fd)
		}
		if _, err := sdnotify.Remove(name); err != nil {
			d.log.Warn("fd store", "name", name, "err", err)
		}
	}
}

// registryKeep says whether a conntrack entry's slots are ones the
// restored registry handed out.
func (d *daemon) registryKeep() func(rule uint16, backend uint32) bool {
	backends := map[uint16]uint32{}
	for name, slot := range d.reg.rules {
		backends[slot] = uint32(len(d.reg.backends[name]))
	}
	return func(rule uint16, backend uint32) bool {
		n, ok := backends[rule]
		return ok && backend < n
	}
}
