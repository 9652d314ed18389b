package config

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"
)

// Fleet is the optional [fleet] table of xlb.toml: share flow state with
// the other appliances of the fleet (pkg/fleet), so that flows the routers
// move keep their backend after the backend set changed. A Config without
// [fleet] has Fleet == nil and shares nothing.
type Fleet struct {
	// Address is this appliance's address on the fleet network: the node
	// binds it and peers know the appliance by it.
	Address netip.Addr
	// Peers are every appliance's addresses, in file order; Address may be
	// among them (one list fits every appliance) and is skipped.
	Peers []netip.Addr
	Port  uint16
	// KeyFile holds the fleet keys (resolved against the configuration's
	// directory); Keys are its keys, read and checked by Load: one per
	// line, the first signs, every one verifies.
	KeyFile string
	Keys    [][]byte
	// JoinTimeout bounds how long a starting (or undrained) appliance
	// waits for its peers' exceptions before it announces its VIPs.
	JoinTimeout time.Duration
	// MaxExceptions is the size of the table of exceptions held from peers.
	MaxExceptions int
	// SendRate bounds the records per second sent to each peer.
	SendRate int
	// Refresh is how often an exception whose flow carries traffic is sent
	// again; at most half the shortest idle timeout of the rules.
	Refresh time.Duration
}

// Fleet limits and defaults.
const (
	DefaultFleetPort          = 9642
	DefaultFleetJoinTimeout   = 5 * time.Second
	MaxFleetJoinTimeout       = 5 * time.Minute
	DefaultFleetMaxExceptions = 1 << 18
	MinFleetMaxExceptions     = 1 << 10
	MaxFleetMaxExceptions     = 1 << 24
	DefaultFleetSendRate      = 50000
	MinFleetSendRate          = 100
	MaxFleetSendRate          = 10000000
	DefaultFleetRefresh       = 10 * time.Second
	MinFleetRefresh           = time.Second
	MaxFleetRefresh           = 5 * time.Minute
	MaxFleetPeers             = 64
	// MinFleetKeyLen is the shortest key accepted, in bytes of its line
	// (32 random bytes in base64 are 44).
	MinFleetKeyLen = 32
)

// DefaultFleet returns the values of the optional [fleet] keys.
func DefaultFleet() Fleet {
	return Fleet{Port: DefaultFleetPort, JoinTimeout: DefaultFleetJoinTimeout, MaxExceptions: DefaultFleetMaxExceptions,
		SendRate: DefaultFleetSendRate, Refresh: DefaultFleetRefresh}
}

// readFleet reads [fleet]. Absent, cfg.Fleet stays nil; the getters still
// run on an empty table so that every key is known to the loader.
func readFleet(t *table, cfg *Config) {
	ft := t.sub("fleet")
	f := DefaultFleet()
	var s string
	if ft.str("address", &s) {
		a, why := parseAddr(s)
		if why != "" {
			ft.errorf("address", "%q %s", s, why)
		}
		f.Address = a
	} else if ft.present && !ft.has("address") {
		ft.errorf("address", "missing (this appliance's address on the fleet network, which its peers send to)")
	}
	readFleetPeers(ft, &f)
	if ft.port("port", &f.Port) && f.Port == DefaultBGPPort {
		ft.errorf("port", "179 is BGP's port")
	}
	if ft.str("key_file", &s) {
		if s == "" {
			ft.errorf("key_file", "must not be empty")
		} else {
			f.KeyFile = resolve(cfg.Dir, s)
			keys, err := ReadFleetKeys(f.KeyFile)
			if err != nil {
				ft.errorf("key_file", "%v", err)
			}
			f.Keys = keys
			if fi, err := os.Stat(f.KeyFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
				ft.warnf("key_file", "%s is mode %04o: other users can read the fleet key (chmod 600)", f.KeyFile, fi.Mode().Perm())
			}
		}
	} else if ft.present && !ft.has("key_file") {
		ft.errorf("key_file", "missing (the file of the fleet's authentication key: head -c 32 /dev/urandom | base64 > fleet.key, the same on every appliance)")
	}
	ft.duration("join_timeout", 0, MaxFleetJoinTimeout, &f.JoinTimeout)
	ft.intField("max_exceptions", MinFleetMaxExceptions, MaxFleetMaxExceptions, &f.MaxExceptions)
	ft.intField("send_rate", MinFleetSendRate, MaxFleetSendRate, &f.SendRate)
	ft.duration("refresh", MinFleetRefresh, MaxFleetRefresh, &f.Refresh)
	ft.done()
	if ft.present {
		cfg.Fleet = &f
	}
}

func readFleetPeers(t *table, f *Fleet) {
	v, ok := t.get("peers")
	if !ok {
		if t.present {
			t.errorf("peers", "missing (every appliance's fleet address; this one's may be listed too)")
		}
		return
	}
	list, ok := v.([]any)
	if !ok {
		t.wrongType("peers", "a list of addresses", v)
		return
	}
	seen := map[netip.Addr]int{}
	for i, e := range list {
		key := joinIndex(t.key("peers"), i)
		s, ok := e.(string)
		if !ok {
			t.f.errorf(key, "want an address as a string, got %s", typeName(e))
			continue
		}
		a, why := parseAddr(s)
		if why != "" {
			t.f.errorf(key, "%q %s", s, why)
			continue
		}
		if j, dup := seen[a]; dup {
			t.f.errorf(key, "%s is also fleet.peers[%d]", a, j)
			continue
		}
		seen[a] = i
		f.Peers = append(f.Peers, a)
	}
	if len(list) > MaxFleetPeers {
		t.errorf("peers", "%d peers, at most %d", len(list), MaxFleetPeers)
	}
}

// Others returns the peers other than Address.
func (f *Fleet) Others() []netip.Addr {
	var out []netip.Addr
	for _, p := range f.Peers {
		if p != f.Address {
			out = append(out, p)
		}
	}
	return out
}

// checkFleet checks [fleet] against the rest: at least one other
// appliance, peers of the address's family, and a refresh well within
// every rule's idle timeout (a copy on a peer lives what the owner's entry
// had left when it was last sent: sent again every refresh, it outlives
// the idle timeout's half at least).
func (l *loader) checkFleet() {
	f := l.cfg.Fleet
	if f == nil || !f.Address.IsValid() {
		return
	}
	others := f.Others()
	if len(f.Peers) > 0 && len(others) == 0 {
		l.main.errorf("fleet.peers", "lists only this appliance (%s): a fleet needs another", f.Address)
	}
	for _, p := range others {
		if p.Is4() != f.Address.Is4() {
			l.main.errorf("fleet.peers", "%s is not of the family of fleet.address %s", p, f.Address)
			break
		}
	}
	for _, r := range l.cfg.Rules {
		if idle := r.ConnectionTracking.IdleTimeout; f.Refresh > idle/2 {
			l.main.errorf("fleet.refresh", "%s is more than half the idle timeout %s of rule %s: an exception in use would expire on the peers between two refreshes", f.Refresh, idle, r.Name)
			return
		}
	}
}

// ReadFleetKeys reads a fleet key file: one key per line (blanks around it
// removed; empty lines and lines starting with # skipped), at least
// MinFleetKeyLen bytes each. The key is the line's bytes. The first signs,
// every one verifies, so a key is rotated by adding the new one second on
// every appliance, then moving it first, then dropping the old one.
func ReadFleetKeys(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read fleet keys: %w", err)
	}
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if len(s) < MinFleetKeyLen {
			return nil, fmt.Errorf("%s:%d: key is %d bytes, want at least %d (e.g. head -c 32 /dev/urandom | base64)", path, line, len(s), MinFleetKeyLen)
		}
		keys = append(keys, []byte(s))
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no key (one per line, at least %d bytes)", path, MinFleetKeyLen)
	}
	return keys, nil
}
