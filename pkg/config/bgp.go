package config

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// BGP is the optional [bgp] table of xlb.toml: announce each VIP to the
// routers (a fleet behind ECMP). A Config without [bgp] has BGP == nil.
type BGP struct {
	LocalAS uint32
	// RouterID is the BGP identifier; invalid means the interface's first
	// IPv4 address (the daemon looks it up at start).
	RouterID      netip.Addr
	HoldTime      time.Duration // whole seconds; keepalive = HoldTime / 3
	WithdrawDelay time.Duration // on shutdown: withdraw, wait this long, then close the sessions
	// GracefulRestart is the restart time offered to the routers (RFC
	// 4724); 0 offers none. With it a restart or upgrade keeps the routes
	// (restart.go in pkg/daemon).
	GracefulRestart time.Duration
	// Communities and LargeCommunities are attached to every announcement,
	// in file order; MED likewise. Every appliance of a fleet must announce
	// the same attributes, or the routers do not merge the paths.
	Communities      []Community
	LargeCommunities []LargeCommunity
	MED              uint32
	Peers            []BGPPeer // in file order, at least one
	// BFD is [bgp.bfd]: the timers of every peer with bfd = true (bfd.go).
	BFD BFDTimers
}

// BGPPeer is one [[bgp.peer]] element.
type BGPPeer struct {
	Address  netip.Addr
	PeerAS   uint32
	Port     uint16 // default 179
	Password string // TCP MD5 (RFC 2385); "" = none
	// EBGPMultihop is the TTL of an eBGP session whose peer is not on a
	// directly connected network; 0 = directly connected (TTL 1).
	EBGPMultihop uint8
	Passive      bool // wait for the peer to connect (xlb then listens on Port)
	// BFD runs a BFD session to the peer with BGP.BFD's timers; its Down
	// ends the BGP session at once (pkg/bgp doc.go "BFD").
	BFD bool
}

// Community is a standard community (RFC 1997), written "AS:VALUE".
type Community struct{ AS, Value uint16 }

func (c Community) String() string { return fmt.Sprintf("%d:%d", c.AS, c.Value) }

// Uint32 is the community's wire value.
func (c Community) Uint32() uint32 { return uint32(c.AS)<<16 | uint32(c.Value) }

// LargeCommunity is a large community (RFC 8092), written "GLOBAL:LOCAL1:LOCAL2".
type LargeCommunity struct{ Global, Local1, Local2 uint32 }

func (c LargeCommunity) String() string { return fmt.Sprintf("%d:%d:%d", c.Global, c.Local1, c.Local2) }

// BGP limits and defaults.
const (
	DefaultBGPHoldTime      = 3 * time.Second // detects a silent appliance in 1.25-3 s (no BFD)
	MinBGPHoldTime          = 3 * time.Second // RFC 4271: 0 or at least 3 s; 0 (no keepalives) is not offered
	MaxBGPHoldTime          = 3600 * time.Second
	DefaultBGPWithdrawDelay = 2 * time.Second
	MaxBGPWithdrawDelay     = 10 * time.Minute
	DefaultBGPPort          = 179
	MaxBGPPasswordLen       = 80 // TCP_MD5SIG_MAXKEYLEN
	MaxBGPPeers             = 64
)

// DefaultBGP returns the values of the optional [bgp] keys.
func DefaultBGP() BGP {
	return BGP{HoldTime: DefaultBGPHoldTime, WithdrawDelay: DefaultBGPWithdrawDelay, BFD: DefaultBFDTimers()}
}

// Keepalive is the keepalive interval sent to the peers: a third of the
// hold time, at least one second.
func (b *BGP) Keepalive() time.Duration {
	return max(time.Second, (b.HoldTime / 3).Truncate(time.Second))
}

// readBGP reads the [bgp] table. Absent, cfg.BGP stays nil; the getters
// still run on an empty table so that every key is known to the loader.
func readBGP(t *table, cfg *Config) {
	bt := t.sub("bgp")
	b := DefaultBGP()

	if !readAS(bt, "local_as", &b.LocalAS) && bt.present && !bt.has("local_as") {
		bt.errorf("local_as", "missing (the appliance's autonomous system number)")
	}
	var rid string
	if bt.str("router_id", &rid) {
		a, err := netip.ParseAddr(rid)
		switch {
		case err != nil || !a.Is4():
			bt.errorf("router_id", "%q is not an IPv4 address (the BGP identifier is written as one)", rid)
		case a.IsUnspecified():
			bt.errorf("router_id", "%q is the unspecified address", rid)
		default:
			b.RouterID = a
		}
	}
	if bt.duration("hold_time", MinBGPHoldTime, MaxBGPHoldTime, &b.HoldTime) && b.HoldTime%time.Second != 0 {
		bt.errorf("hold_time", "%s is not a whole number of seconds (BGP carries seconds)", b.HoldTime)
	}
	bt.duration("withdraw_delay", 0, MaxBGPWithdrawDelay, &b.WithdrawDelay)
	readGracefulRestart(bt, &b)
	readCommunities(bt, &b)
	readBFD(bt, &b)
	var med int64
	if bt.integer("med", 0, math.MaxUint32, &med) {
		b.MED = uint32(med)
	}

	peers := bt.tables("peer")
	if len(peers) == 0 {
		// Ask for the keys of a peer once so the loader knows them.
		readBGPPeer(newTable(bt.f, bt.key("peer"), nil), b.LocalAS)
		if bt.present && !bt.has("peer") {
			bt.errorf("peer", "no [[bgp.peer]]: at least one router to announce to is needed")
		}
	}
	seen := map[netip.Addr]int{}
	for i, pt := range peers {
		p, ok := readBGPPeer(pt, b.LocalAS)
		if !ok {
			continue
		}
		if j, dup := seen[p.Address]; dup {
			pt.errorf("address", "%s is also bgp.peer[%d]", p.Address, j)
			continue
		}
		seen[p.Address] = i
		b.Peers = append(b.Peers, p)
	}
	if len(peers) > MaxBGPPeers {
		bt.errorf("peer", "%d peers, at most %d", len(peers), MaxBGPPeers)
	}
	bt.done()
	if bt.present {
		cfg.BGP = &b
	}
}

func readBGPPeer(pt *table, localAS uint32) (BGPPeer, bool) {
	p := BGPPeer{Port: DefaultBGPPort}
	ok := true
	var addr string
	if pt.str("address", &addr) {
		a, why := parseAddr(addr)
		if why == "" && a.IsLoopback() {
			why = "is a loopback address"
		}
		if why != "" {
			pt.errorf("address", "%q %s", addr, why)
			ok = false
		}
		p.Address = a
	} else {
		if pt.present && !pt.has("address") {
			pt.errorf("address", "missing (the router's address)")
		}
		ok = false
	}
	if !readAS(pt, "peer_as", &p.PeerAS) {
		if pt.present && !pt.has("peer_as") {
			pt.errorf("peer_as", "missing (the router's autonomous system number)")
		}
		ok = false
	}
	if !pt.port("port", &p.Port) && pt.has("port") {
		ok = false
	}
	if pt.str("password", &p.Password) {
		if p.Password == "" || len(p.Password) > MaxBGPPasswordLen {
			pt.errorf("password", "want 1..%d characters (TCP MD5 key), got %d", MaxBGPPasswordLen, len(p.Password))
			ok = false
		}
	}
	var ttl int64
	if pt.integer("ebgp_multihop", 1, 255, &ttl) {
		p.EBGPMultihop = uint8(ttl)
		if localAS != 0 && p.PeerAS == localAS {
			pt.errorf("ebgp_multihop", "the session is iBGP (peer_as = local_as %d): multihop applies to eBGP only", localAS)
			ok = false
		}
	} else if pt.has("ebgp_multihop") {
		ok = false
	}
	pt.boolean("passive", &p.Passive)
	ok = readPeerBFD(pt, &p) && ok
	pt.done()
	return p, ok
}

// readAS reads an AS number: 1..4294967294, not AS_TRANS (23456) nor the
// reserved 65535 (RFC 7300).
func readAS(t *table, k string, dst *uint32) bool {
	if s, isStr := t.m[k].(string); isStr {
		t.get(k)
		t.errorf(k, "%q: write the AS number as an integer (%s = 65001); 4-byte numbers in asplain", s, k)
		return false
	}
	var n int64
	if !t.integer(k, 1, math.MaxUint32-1, &n) {
		return false
	}
	switch n {
	case 23456:
		t.errorf(k, "23456 is AS_TRANS (RFC 6793), not an AS number")
		return false
	case 65535:
		t.errorf(k, "65535 is reserved (RFC 7300)")
		return false
	}
	*dst = uint32(n)
	return true
}

func readCommunities(t *table, b *BGP) {
	v, ok := t.get("communities")
	if !ok {
		return
	}
	list, ok := v.([]any)
	if !ok {
		t.wrongType("communities", "a list of strings like \"65000:80\"", v)
		return
	}
	for i, e := range list {
		key := joinIndex(t.key("communities"), i)
		s, ok := e.(string)
		if !ok {
			t.f.errorf(key, "want a string like \"65000:80\", got %s", typeName(e))
			continue
		}
		parts := strings.Split(s, ":")
		switch len(parts) {
		case 2:
			a, err1 := strconv.ParseUint(parts[0], 10, 16)
			v, err2 := strconv.ParseUint(parts[1], 10, 16)
			if err1 != nil || err2 != nil {
				t.f.errorf(key, "%q: a community is AS:VALUE, each 0..65535", s)
				continue
			}
			b.Communities = append(b.Communities, Community{uint16(a), uint16(v)})
		case 3:
			var n [3]uint64
			bad := false
			for j, p := range parts {
				var err error
				if n[j], err = strconv.ParseUint(p, 10, 32); err != nil {
					bad = true
				}
			}
			if bad {
				t.f.errorf(key, "%q: a large community is GLOBAL:LOCAL1:LOCAL2, each 0..4294967295", s)
				continue
			}
			b.LargeCommunities = append(b.LargeCommunities, LargeCommunity{uint32(n[0]), uint32(n[1]), uint32(n[2])})
		default:
			t.f.errorf(key, "%q is neither a community (AS:VALUE) nor a large community (GLOBAL:LOCAL1:LOCAL2)", s)
		}
	}
}

// checkBGP warns about VIPs no peer can carry: IPv4 VIPs are announced to
// IPv4 peers and IPv6 VIPs to IPv6 peers (each session carries its own
// family, with the session's address as next hop).
func (l *loader) checkBGP() {
	b := l.cfg.BGP
	if b == nil || len(l.is.errs) > 0 {
		return // a peer dropped for an error would make this warning wrong
	}
	var peer4, peer6 bool
	for _, p := range b.Peers {
		peer4 = peer4 || p.Address.Is4()
		peer6 = peer6 || p.Address.Is6()
	}
	warned := map[bool]bool{}
	for _, r := range l.cfg.Rules {
		v4 := r.VIP.Is4()
		if (v4 && peer4) || (!v4 && peer6) || warned[v4] || !r.VIP.IsValid() {
			continue
		}
		warned[v4] = true
		fam := map[bool]string{true: "IPv4", false: "IPv6"}[v4]
		l.main.warnf("bgp.peer", "%s VIPs (%s of rule %s) are not announced: no %s peer", fam, r.VIP, r.Name, fam)
	}
}
