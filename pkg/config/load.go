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
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
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
// whose path or bytes changed, and reads again only those whose identity
// changed (fileStat: device, inode, size, modification and change times)
// or that had changed less than a second before they were read; the
// checks across files run on the whole. Rules parsed from the same bytes
// are then the same: SameSource says so in O(1), so a caller that reloads
// a thousand rules finds the one that changed without comparing them.
// Safe for concurrent use; the zero value is ready.
type Loader struct {
	mu       sync.Mutex
	parsed   map[string]*parsedRule    // by path, the files of the last Load
	services map[string]*parsedService // by path, the service files of the last Load
	reads    int                       // rule files read (tests)
}

// parsedRule is one clean rule file as readRule left it.
type parsedRule struct {
	data []byte
	name string  // the display name it was parsed under
	rs   ruleSrc // its f is a template: lines and placeholders, no issues
	f    srcFile
	// stat is the file's identity when it was read (fileStat), zero when
	// it changed too shortly before to be trusted.
	stat fileStat
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
	entries, err := os.ReadDir(l.cfg.RulesDir)
	if err != nil {
		if !l.mainBroken {
			l.main.errorf("rules_dir", "cannot read %s: %v", l.cfg.RulesDir, unwrapPathError(err))
		}
		return
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		// Hidden files are editor and tool leftovers (.web.toml.swp, .#web.toml).
		if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".toml") || e.IsDir() {
			continue
		}
		files = append(files, n)
	}
	files = l.overlayNames(files)
	slices.Sort(files)
	for _, n := range files {
		p := filepath.Join(l.cfg.RulesDir, n)
		f := &srcFile{name: l.displayName(p), is: l.is}
		l.is.rank(f.name)
		data, inOverlay := l.overlay[n]
		var stat fileStat // zero for a file from memory: never trusted
		if !inOverlay {
			// A file whose identity (inode, size, change times) is the one
			// it had when a previous load read it is not read again.
			stat = statFile(p)
			if rs := l.cachedByStat(p, f.name, stat); rs != nil {
				l.rules = append(l.rules, rs)
				continue
			}
			if data, err = os.ReadFile(p); err != nil {
				l.is.errorf(f.name, 0, "", "cannot read: %v", unwrapPathError(err))
				continue
			}
			if l.cache != nil {
				l.cache.reads++
			}
		}
		if rs := l.cached(p, f.name, data, stat); rs != nil {
			l.rules = append(l.rules, rs)
			continue
		}
		errs, warns := len(l.is.errs), len(l.is.warns)
		t := decodeFile(f, data)
		if t == nil {
			continue
		}
		rs := readRule(t, strings.TrimSuffix(n, ".toml"))
		rs.rule.File = f.name
		if l.cache != nil && len(l.is.errs) == errs && len(l.is.warns) == warns {
			l.remember(p, data, rs, stat)
		}
		l.rules = append(l.rules, rs)
	}
	if l.cache != nil {
		l.cache.parsed = l.parsed // files gone from the directory are forgotten
	}
	if len(files) == 0 && !l.mainBroken {
		l.is.warnf(l.main.name, l.main.lines.line("rules_dir"), "rules_dir", "%s holds no *.toml rule files: nothing will be forwarded", l.cfg.RulesDir)
	}
}

// cachedByStat returns a copy of the rule parsed by an earlier load from
// the file as it is now, judged by its identity alone, or nil.
func (l *loader) cachedByStat(path, name string, stat fileStat) *ruleSrc {
	if l.cache == nil || !stat.valid() {
		return nil
	}
	c := l.cache.parsed[path]
	if c == nil || c.name != name || c.stat != stat {
		return nil
	}
	return l.reuse(path, c)
}

// cached returns a copy of the rule parsed from these bytes of this file
// by an earlier load, or nil.
func (l *loader) cached(path, name string, data []byte, stat fileStat) *ruleSrc {
	if l.cache == nil {
		return nil
	}
	c := l.cache.parsed[path]
	if c == nil || c.name != name || !bytes.Equal(c.data, data) {
		return nil
	}
	c.stat = stat.trusted()
	return l.reuse(path, c)
}

// reuse keeps c for the next load and returns a copy of its rule that
// reports into this load.
func (l *loader) reuse(path string, c *parsedRule) *ruleSrc {
	l.keep(path, c)
	rs := c.rs
	f := c.f
	f.is = l.is // the checks across files report into this load
	rs.f = &f
	return &rs
}

// remember keeps a clean parse for the next load.
func (l *loader) remember(path string, data []byte, rs *ruleSrc, stat fileStat) {
	c := &parsedRule{data: data, name: rs.f.name, f: *rs.f, stat: stat.trusted()}
	c.f.is = nil
	rs.rule.src = c
	c.rs = *rs
	l.keep(path, c)
}

func (l *loader) keep(path string, c *parsedRule) {
	if l.parsed == nil {
		l.parsed = map[string]*parsedRule{}
	}
	l.parsed[path] = c
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
