package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/BurntSushi/toml"
	"golang.org/x/sys/unix"
)

// Load reads the appliance file at path (xlb.toml) and every *.toml file of
// its rules_dir, applies the defaults and validates the whole. It returns a
// Config only when there is no error; the error is then an *Error listing
// every problem found in every file (or, when path itself cannot be read, a
// plain wrapped error). Warnings are returned in both cases.
func Load(path string) (*Config, []Warning, error) {
	return load(path, nil, nil)
}

// Loader is Load with a memory: it keeps each rule file it parsed without
// an error or a warning, and a later Load parses again only the files
// whose path or bytes changed. It looks only at the files a watch on
// rules_dir saw change (watch.go); when the watch cannot tell, it lists
// the directory and reads again the files whose identity changed
// (fileStat: device, inode, size, modification and change times) or that
// had changed less than a second before they were read. A kept file's
// *Rule is the one the earlier Config holds, so SameSource tells in O(1)
// that a rule is the same parse, and a reload of a thousand rules finds
// the one that changed without comparing them. The checks across files
// run on the whole, without a table of it. Safe for concurrent use; the
// zero value is ready; Close releases the watch.
type Loader struct {
	mu       sync.Mutex
	parsed   map[string]*parsedRule    // by file name, the rule files of the last Load
	services map[string]*parsedService // by path, the service files of the last Load
	reads    int                       // rule files read (tests)
	scans    int                       // rules_dir listed whole (tests)

	// rulesDir is the rules_dir (and configDir the directory of xlb.toml)
	// of the last load: parsed, files and watch describe it.
	rulesDir, configDir string
	// watch, when set, tells which entries of rulesDir changed since the
	// last load (watch.go); files is then rulesDir's rule files as that
	// load listed them, in name order, and volatile the ones the watch
	// cannot see change (symlinks, whose target may change elsewhere, and
	// files with other hard links), which every load stats.
	watch    *dirWatch
	files    []string
	volatile map[string]bool
	events   map[string]bool // a load's changed names (kept for its storage)
	noWatch  bool            // tests: stat every file, as without inotify
}

// Close releases the Loader's directory watch; a later Load sets it again.
func (ld *Loader) Close() {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	ld.dropWatch()
}

func (ld *Loader) dropWatch() {
	ld.watch.close()
	ld.watch, ld.files = nil, nil
}

// parsedRule is one clean rule file as readRule left it.
type parsedRule struct {
	data []byte
	name string // the display name it was parsed under
	// rs is the parse. A rule with its own backends is shared by every
	// load that finds the file unchanged (its Rule is the one the Configs
	// hold; a load that would change it copies it first, sharedRule); a
	// rule that names a backend service is copied by each load, which
	// gives it the service's keys.
	rs *ruleSrc
	f  srcFile // rs.f: its issues go to the load in progress
	// shared: an earlier load returned rs's Rule (reuse), so a load that
	// would change it copies it first (sharedRule).
	shared bool
	// stat is the file's identity when it was read (fileStat), zero when
	// it changed too shortly before to be trusted.
	stat fileStat
	by   *loader // the last load that kept it
}

// Load is Load, parsing again only the rule files that changed since the
// previous Load of this Loader.
func (ld *Loader) Load(path string) (*Config, []Warning, error) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return load(path, ld, nil)
}

// SameSource reports whether r and o were parsed from the same bytes of
// the same file by one Loader, and so were the backend service they name
// and the groups it gives them (false for rules of the package's Load).
func (r *Rule) SameSource(o *Rule) bool {
	return r.src != nil && r.src == o.src && r.svc == o.svc && (r.Service == "" || r.svc != nil) &&
		len(r.Groups) == len(o.Groups) && (len(r.Groups) == 0 || &r.Groups[0] == &o.Groups[0])
}

// load reads the configuration; a cache (Loader) reuses clean rule files,
// an overlay (LoadWithRules) replaces rule files by name.
func load(path string, cache *Loader, overlay map[string][]byte) (*Config, []Warning, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load config: %w", err)
	}
	is := &issues{}
	cfg := Default()
	cfg.Path = path
	cfg.Dir = filepath.Dir(path)

	mainFile := &srcFile{name: filepath.Base(path), is: is}
	is.rank(mainFile.name)
	root := decodeFile(mainFile, data)
	if root != nil {
		readMain(root, &cfg)
	} else if dir := topLevelStrings(string(data))["rules_dir"]; dir != "" {
		// The syntax error rejects the file; the rule files are still
		// checked, from the rules_dir the file names if that line reads.
		cfg.RulesDir = dir
	}
	cfg.RulesDir = resolve(cfg.Dir, cfg.RulesDir)
	cfg.ServicesDir = resolve(cfg.Dir, cfg.ServicesDir)
	l := &loader{cfg: &cfg, main: mainFile, is: is, mainBroken: root == nil, cache: cache, overlay: overlay}
	l.readRules()
	l.readServices()
	l.defaultProbePaths()
	l.resolveServices()
	l.crossCheck()
	l.checkBGP()
	l.checkFleet()

	ws, err := is.result()
	if err != nil {
		return nil, ws, err
	}
	return &cfg, ws, nil
}

// decodeFile parses TOML text and scans its key lines. A syntax error is
// recorded with its line and yields nil.
//
// An integer that does not fit in 64 bits stops the TOML parser; it is
// reported with its key, replaced by 0 (whatever a getter then says about
// that line is left out) and the file parsed again, so that its other
// errors are found too.
func decodeFile(f *srcFile, data []byte) *table {
	var m map[string]any
	text := string(data)
	for {
		_, err := toml.Decode(text, &m)
		if err == nil {
			break
		}
		var pe toml.ParseError
		if !errors.As(err, &pe) {
			f.is.errorf(f.name, 0, "", "%v", err)
			return nil
		}
		p := pe.Position
		if strings.HasSuffix(pe.Message, "is out of range for int64") && p.Len > 0 && p.Start >= 0 && p.Start+p.Len <= len(text) && len(f.placeholders) < 100 {
			f.is.errorf(f.name, p.Line, pe.LastKey, "%s does not fit in a 64-bit integer", text[p.Start:p.Start+p.Len])
			if f.placeholders == nil {
				f.placeholders = map[int]bool{}
			}
			f.placeholders[p.Line] = true
			text = text[:p.Start] + "0" + text[p.Start+p.Len:]
			m = nil
			continue
		}
		f.is.errorf(f.name, p.Line, "", "%s", pe.Message)
		return nil
	}
	f.lines = newLazyLines(text)
	return newTable(f, "", m)
}

// resolve makes p relative to dir unless it is absolute.
func resolve(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

func readMain(t *table, cfg *Config) {
	if !t.str("interface", &cfg.Interface) && !t.has("interface") {
		t.errorf("interface", "missing (the one network interface xlb receives and sends on, e.g. \"eth0\")")
	} else if cfg.Interface != "" && !validIfName(cfg.Interface) {
		t.errorf("interface", "%q is not a network interface name", cfg.Interface)
		cfg.Interface = ""
	}
	readQueues(t, &cfg.Queues)
	enum(t, "xdp_mode", xdpModeNames, &cfg.XDPMode)
	enum(t, "bind_mode", bindModeNames, &cfg.BindMode)
	readHashSeed(t, cfg)

	var size int64
	if t.integer("maglev_table_size", 1, math.MaxInt64, &size) {
		// Primality is checked with the size the rules need (crossCheck),
		// so that one message makes one suggestion.
		cfg.MaglevTableSize = int(size)
		if size > MaxMaglevTableSize {
			t.errorf("maglev_table_size", "%d is larger than %d", size, MaxMaglevTableSize)
		}
	}
	for _, k := range []struct {
		key string
		dst *string
	}{{"rules_dir", &cfg.RulesDir}, {"services_dir", &cfg.ServicesDir}, {"state_file", &cfg.StateFile}, {"control_socket", &cfg.ControlSocket}} {
		var s string
		if t.str(k.key, &s) {
			if s == "" {
				t.errorf(k.key, "must not be empty")
				continue
			}
			*k.dst = s
		}
	}
	t.str("control_socket_group", &cfg.ControlSocketGroup) // exists? CheckHost
	cfg.StateFile = resolve(cfg.Dir, cfg.StateFile)
	cfg.ControlSocket = resolve(cfg.Dir, cfg.ControlSocket)

	var listen string
	if t.str("metrics_listen", &listen) {
		if listen != "" {
			if _, port, err := net.SplitHostPort(listen); err != nil {
				t.errorf("metrics_listen", "%q is not host:port", listen)
			} else if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
				t.errorf("metrics_listen", "%q has no valid port", listen)
			}
		}
		cfg.MetricsListen = listen
	}

	readPinDir(t, cfg)
	t.intField("worker_nice", -20, 19, &cfg.WorkerNice)
	t.duration("busy_poll", 0, MaxBusyPoll, &cfg.BusyPoll)
	t.intField("busy_poll_budget", 1, MaxBusyPollBudget, &cfg.BusyPollBudget)
	cfg.HealthCheckPathSet = enum(t, "health_check_path", probePathNames, &cfg.HealthCheckPath)
	ct := t.sub("conntrack")
	ct.intField("max_entries", MinMaxEntries, MaxMaxEntries, &cfg.Conntrack.MaxEntries)
	readFloodLimits(ct, &cfg.Conntrack)
	ct.done()
	readBGP(t, cfg)
	readFleet(t, cfg)
	enum(t, "unmatched_vip_traffic", unmatchedVIPTrafficNames, &cfg.UnmatchedVIPTraffic)
	t.done()
}

func validIfName(s string) bool {
	if len(s) > 15 || s == "." || s == ".." {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c == '/' || c == ':' || c > '~' {
			return false
		}
	}
	return true
}

func readQueues(t *table, q *Queues) {
	v, ok := t.get("queues")
	if !ok {
		return
	}
	switch x := v.(type) {
	case string:
		if x != "all" {
			t.errorf("queues", "%q is not \"all\", a number of queues or a list of queue ids", x)
			return
		}
		*q = Queues{All: true}
	case int64:
		if x < 1 || x > MaxQueues {
			t.errorf("queues", "%d is outside [1, %d]", x, MaxQueues)
			return
		}
		*q = Queues{Count: int(x)}
	case []any:
		if len(x) == 0 {
			t.errorf("queues", "the list is empty")
			return
		}
		list := make([]int, 0, len(x))
		bad := false
		for i, e := range x {
			key := joinIndex(t.key("queues"), i)
			n, ok := e.(int64)
			switch {
			case !ok:
				t.f.errorf(key, "want a queue id (integer), got %s", typeName(e))
				bad = true
			case n < 0 || n >= MaxQueues:
				t.f.errorf(key, "%d is outside [0, %d]", n, MaxQueues-1)
				bad = true
			case slices.Contains(list, int(n)):
				t.f.errorf(key, "queue %d is listed twice", n)
				bad = true
			default:
				list = append(list, int(n))
			}
		}
		if !bad {
			slices.Sort(list)
			*q = Queues{List: list}
		}
	default:
		t.wrongType("queues", "\"all\", an integer or a list of integers", v)
	}
}

func readHashSeed(t *table, cfg *Config) {
	v, ok := t.get("hash_seed")
	if !ok {
		t.warnf("hash_seed", "not set: using the public default 0x5eed lets anyone predict which backend a flow reaches; set the same secret seed on every appliance of the fleet")
		return
	}
	switch x := v.(type) {
	case string:
		n, err := strconv.ParseUint(strings.ReplaceAll(x, "_", ""), 0, 64)
		if err != nil || x == "" {
			t.errorf("hash_seed", "%q is not a 64-bit number (write hex like \"0x5eed\" or decimal)", x)
			return
		}
		cfg.HashSeed, cfg.HashSeedSet = n, true
	case int64:
		if x < 0 {
			t.errorf("hash_seed", "%d is negative", x)
			return
		}
		cfg.HashSeed, cfg.HashSeedSet = uint64(x), true
	default:
		t.wrongType("hash_seed", "a string like \"0x5eed\"", v)
	}
}

func isPrime(n int64) bool {
	if n < 2 {
		return false
	}
	for d := int64(2); d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

func nextPrime(n int64) int64 {
	for n++; !isPrime(n); n++ {
	}
	return n
}

// ruleSrc is a rule with what the cross-rule checks need to know about it.
type ruleSrc struct {
	rule    Rule
	f       *srcFile
	vipOK   bool
	portsOK bool
	// backendKeys: each backend's key path as written (group[1].backends[2]
	// or …backends[2].address), for messages about it.
	backendKeys map[netip.Addr]string
	// probePathSet: the rule's [health_check] names its path.
	probePathSet bool
	// rangesSet: the rule writes source_ranges (then its list wins over
	// its service's, service.go).
	rangesSet bool
}

type loader struct {
	cfg   *Config
	main  *srcFile
	is    *issues
	rules []*ruleSrc
	// mainBroken: xlb.toml did not parse (its syntax error is reported);
	// what depends on its keys is not reported again.
	mainBroken bool
	cache      *Loader   // nil for Load
	services   []*svcSrc // the service files, by file name
	// servicesAbsent: services_dir does not exist (no services).
	servicesAbsent bool
	parsed         map[string]*parsedRule // this load's clean rule files, for the cache
	// overlay replaces rule files by name (LoadWithRules).
	overlay map[string][]byte
	order   []*ruleSrc // crossCheck's sorted rules
	// rulesPrefix is the display name of rules_dir with a separator ("" when
	// it is the configuration's directory): a rule file's display name is
	// rulesPrefix and its name.
	rulesPrefix string
}

// displayName is a file's path relative to the config dir, or absolute when
// it lies outside.
func (l *loader) displayName(p string) string {
	if rel, err := filepath.Rel(l.cfg.Dir, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

func (l *loader) readRules() {
	files, maybe, ok := l.ruleFiles()
	if !ok {
		return
	}
	l.is.ruleRank = l.ruleRank(files)
	l.rules = make([]*ruleSrc, 0, len(files))
	var parsed []fileParse
	if maybe == nil && l.overlay == nil && len(files) >= parallelParseMin && (l.cache == nil || len(l.cache.parsed) == 0) {
		parsed = l.parseAll(files)
	}
	for i, n := range files {
		if parsed != nil {
			l.takeParse(n, &parsed[i])
			continue
		}
		event, listed := maybe[n]
		if maybe != nil && !listed {
			// The watch saw no change to this file since a load kept it.
			if c := l.parsed[n]; c != nil {
				l.rules = append(l.rules, l.reuse(n, c))
				continue
			}
		}
		l.readRuleFile(n, event)
		if c := l.parsed[n]; c != nil && c.by != l {
			delete(l.parsed, n) // it no longer reads clean
		}
	}
	if l.cache != nil {
		l.cache.parsed = l.parsed // files gone from the directory are forgotten
	}
	if len(files) == 0 && !l.mainBroken {
		l.is.warnf(l.main.name, l.main.lines.line("rules_dir"), "rules_dir", "%s holds no *.toml rule files: nothing will be forwarded", l.cfg.RulesDir)
	}
}

// readRuleFile reads rules_dir's file n, or takes an earlier load's
// parse of it when its identity (unless the watch saw an event: the
// bytes are compared then) or its bytes are the same.
func (l *loader) readRuleFile(n string, event bool) {
	p := filepath.Join(l.cfg.RulesDir, n)
	f := &srcFile{name: l.ruleDisplayName(n), is: l.is}
	data, inOverlay := l.overlay[n]
	var stat fileStat // zero for a file from memory: never trusted
	if !inOverlay {
		// A file whose identity (inode, size, change times) is the one
		// it had when a previous load read it is not read again.
		stat = statFile(p)
		l.noteVolatile(n, p, stat)
		if rs := l.cachedByStat(n, f.name, stat, event); rs != nil {
			l.rules = append(l.rules, rs)
			return
		}
		var err error
		if data, err = os.ReadFile(p); err != nil {
			l.is.errorf(f.name, 0, "", "cannot read: %v", unwrapPathError(err))
			return
		}
		if l.cache != nil {
			l.cache.reads++
		}
	}
	if rs := l.cached(n, f.name, data, stat); rs != nil {
		l.rules = append(l.rules, rs)
		return
	}
	errs, warns := len(l.is.errs), len(l.is.warns)
	rs := parseRule(f, n, data)
	if rs == nil {
		return
	}
	if l.cache != nil && len(l.is.errs) == errs && len(l.is.warns) == warns {
		l.remember(n, data, rs, stat)
	}
	l.rules = append(l.rules, rs)
}

// ruleFiles returns rules_dir's rule files in name order and, when the
// Loader's watch can tell, the names that may have changed since its last
// load (maybe; nil: any of them). ok is false when rules_dir cannot be
// read (reported).
func (l *loader) ruleFiles() (files []string, maybe map[string]bool, ok bool) {
	dir := l.cfg.RulesDir
	if l.rulesPrefix = l.displayName(dir); l.rulesPrefix == "." {
		l.rulesPrefix = ""
	} else {
		l.rulesPrefix += string(filepath.Separator)
	}
	ld := l.cache
	if ld == nil || l.overlay != nil {
		files, ok = l.scanRules()
		return files, nil, ok
	}
	if ld.rulesDir != dir || ld.configDir != l.cfg.Dir {
		ld.dropWatch()
		ld.parsed, ld.volatile = nil, nil
		ld.rulesDir, ld.configDir = dir, l.cfg.Dir
	}
	if ld.watch != nil {
		if ld.events == nil {
			ld.events = map[string]bool{}
		}
		clear(ld.events)
		if !ld.watch.changes(ld.events) {
			l.parsed = ld.parsed
			for n := range ld.events {
				if isRuleName(n) {
					ld.updateEntry(n)
				}
			}
			for n := range ld.volatile {
				ld.events[n] = ld.events[n] // listed: stat it (false, unless an event came too)
			}
			return ld.files, ld.events, true
		}
		ld.dropWatch()
	}
	if !ld.noWatch {
		// Set before the scan: a change made during it is in the queue.
		if w, err := watchDir(dir); err == nil {
			ld.watch = w
		}
	}
	ld.volatile = nil
	if files, ok = l.scanRules(); !ok {
		ld.dropWatch()
	} else if ld.watch != nil {
		ld.files = slices.Clone(files)
	}
	return files, nil, ok
}

// scanRules lists rules_dir's rule files in name order.
func (l *loader) scanRules() ([]string, bool) {
	if l.cache != nil {
		l.cache.scans++
	}
	entries, err := os.ReadDir(l.cfg.RulesDir)
	if err != nil {
		if !l.mainBroken {
			l.main.errorf("rules_dir", "cannot read %s: %v", l.cfg.RulesDir, unwrapPathError(err))
		}
		return nil, false
	}
	var files []string
	for _, e := range entries {
		if n := e.Name(); isRuleName(n) && !e.IsDir() {
			files = append(files, n)
		}
	}
	files = l.overlayNames(files)
	slices.Sort(files)
	return files, true
}

// updateEntry brings files (and parsed, volatile) up to date with the
// entry n of rules_dir after the watch saw it change: a rule file when it
// is there and not a directory (as os.ReadDir tells, a symlink is not).
func (ld *Loader) updateEntry(n string) {
	var st unix.Stat_t
	there := unix.Lstat(filepath.Join(ld.rulesDir, n), &st) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR
	i, listed := slices.BinarySearch(ld.files, n)
	switch {
	case there && !listed:
		ld.files = slices.Insert(ld.files, i, n)
	case !there && listed:
		ld.files = slices.Delete(ld.files, i, i+1)
	}
	if !there {
		delete(ld.parsed, n)
		delete(ld.volatile, n)
	}
}

// noteVolatile records whether the watch can see rule file n change: not
// when it is a symlink (its target may change in another directory) or
// has other hard links (written through them).
func (l *loader) noteVolatile(n, path string, stat fileStat) {
	ld := l.cache
	if ld == nil || ld.watch == nil {
		return
	}
	var st unix.Stat_t
	if stat.nlink > 1 || unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		if ld.volatile == nil {
			ld.volatile = map[string]bool{}
		}
		ld.volatile[n] = true
	} else {
		delete(ld.volatile, n)
	}
}

// parallelParseMin is the number of rule files from which a load that
// keeps nothing (the first) reads and parses them on every CPU.
const parallelParseMin = 32

// fileParse is one rule file read and parsed by parseAll, its findings
// apart until takeParse adds them in file order.
type fileParse struct {
	stat fileStat
	data []byte
	rs   *ruleSrc // nil: it did not read or parse (is says why)
	is   issues
}

// parseAll reads and parses files on one goroutine per CPU. Each file's
// parse reads nothing but its own bytes and reports into its own issues,
// so the result (and every message) is the serial one's.
func (l *loader) parseAll(files []string) []fileParse {
	out := make([]fileParse, len(files))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(files)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return
				}
				l.parseOne(files[i], &out[i])
			}
		})
	}
	wg.Wait()
	return out
}

func (l *loader) parseOne(n string, fp *fileParse) {
	p := filepath.Join(l.cfg.RulesDir, n)
	f := &srcFile{name: l.ruleDisplayName(n), is: &fp.is}
	fp.stat = statFile(p)
	data, err := os.ReadFile(p)
	if err != nil {
		fp.is.errorf(f.name, 0, "", "cannot read: %v", unwrapPathError(err))
		return
	}
	fp.data = data
	fp.rs = parseRule(f, n, data)
}

// parseRule parses the bytes of rules_dir's file n, reporting into f's
// issues; nil when they do not decode.
func parseRule(f *srcFile, n string, data []byte) *ruleSrc {
	t := decodeFile(f, data)
	if t == nil {
		return nil
	}
	rs := readRule(t, strings.TrimSuffix(n, ".toml"))
	rs.rule.File = f.name
	return rs
}

// takeParse adds a file parseAll parsed to the load, as readRuleFile
// would have.
func (l *loader) takeParse(n string, fp *fileParse) {
	l.is.errs = append(l.is.errs, fp.is.errs...)
	l.is.warns = append(l.is.warns, fp.is.warns...)
	if fp.data == nil {
		return
	}
	if l.cache != nil {
		l.cache.reads++
		l.noteVolatile(n, filepath.Join(l.cfg.RulesDir, n), fp.stat)
	}
	if fp.rs == nil {
		return
	}
	fp.rs.f.is = l.is
	if l.cache != nil && len(fp.is.errs) == 0 && len(fp.is.warns) == 0 {
		l.remember(n, fp.data, fp.rs, fp.stat)
	}
	l.rules = append(l.rules, fp.rs)
}

// isRuleName: a rules_dir entry of this name is read as a rule file.
// Hidden files are editor and tool leftovers (.web.toml.swp, .#web.toml).
func isRuleName(n string) bool {
	return !strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".toml")
}

// ruleDisplayName is displayName of rules_dir's file n.
func (l *loader) ruleDisplayName(n string) string {
	return l.rulesPrefix + n
}

// ruleRank orders the rule files' issues after xlb.toml's, in file name
// order, without a table of every file's name (issues.key).
func (l *loader) ruleRank(files []string) func(string) (int, bool) {
	return func(display string) (int, bool) {
		n, ok := strings.CutPrefix(display, l.rulesPrefix)
		if !ok {
			return 0, false
		}
		return slices.BinarySearch(files, n)
	}
}

// cachedByStat returns the rule parsed by an earlier load from the file
// as it is now, judged by its identity alone, or nil (always after the
// watch saw an event on it: the bytes are compared).
func (l *loader) cachedByStat(n, name string, stat fileStat, event bool) *ruleSrc {
	if l.cache == nil || !stat.valid() || event {
		return nil
	}
	c := l.cache.parsed[n]
	if c == nil || c.name != name || c.stat != stat {
		return nil
	}
	return l.reuse(n, c)
}

// cached returns a copy of the rule parsed from these bytes of this file
// by an earlier load, or nil.
func (l *loader) cached(n, name string, data []byte, stat fileStat) *ruleSrc {
	if l.cache == nil {
		return nil
	}
	c := l.cache.parsed[n]
	if c == nil || c.name != name || !bytes.Equal(c.data, data) {
		return nil
	}
	c.stat = stat.trusted()
	return l.reuse(n, c)
}

// reuse keeps c for the next load and returns its rule, reporting into
// this load: the cached one for a rule with its own backends, a copy for
// one that names a backend service (resolveServices writes into it).
func (l *loader) reuse(n string, c *parsedRule) *ruleSrc {
	l.keep(n, c)
	c.f.is = l.is // the checks across files report into this load
	if c.rs.rule.Service == "" {
		c.shared = true
		return c.rs
	}
	rs := *c.rs
	return &rs
}

// remember keeps a clean parse for the next load.
func (l *loader) remember(n string, data []byte, rs *ruleSrc, stat fileStat) {
	c := &parsedRule{data: data, name: rs.f.name, f: *rs.f, stat: stat.trusted()}
	rs.rule.src = c
	rs.f = &c.f
	if rs.rule.Service == "" {
		c.rs = rs
	} else {
		cp := *rs
		c.rs = &cp
	}
	l.keep(n, c)
}

// sharedRule returns rs ready to be written: rs itself when no earlier
// Config holds its Rule, else a copy that replaces it in the cache (the
// Config of an earlier load keeps the rule it was given).
func (l *loader) sharedRule(rs *ruleSrc) *ruleSrc {
	c := rs.rule.src
	if c == nil || c.rs != rs || !c.shared {
		return rs
	}
	cp := *rs
	c.rs, c.shared = &cp, false
	return &cp
}

func (l *loader) keep(n string, c *parsedRule) {
	if l.parsed == nil {
		l.parsed = map[string]*parsedRule{}
	}
	l.parsed[n] = c
	c.by = l
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
