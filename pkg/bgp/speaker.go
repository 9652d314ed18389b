package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/xlbnet/xlb/pkg/bfd"
)

// Options configure a Speaker.
type Options struct {
	LocalAS  uint32
	RouterID netip.Addr // IPv4, required
	// HoldTime is proposed to every peer (whole seconds, ≥ 3 s); the
	// keepalive interval is a third of it, at least one second.
	HoldTime time.Duration
	Peers    []Peer
	Attrs    Attributes
	// ListenPort: 0 listens on TCP 179 only when a peer is passive, -1
	// never listens, > 0 listens on that port (tests).
	ListenPort int
	// GracefulRestart, when > 0, offers the graceful-restart capability
	// (RFC 4724) with this restart time to every peer, so that Detach can
	// leave the routes at the routers (marked stale) for a successor.
	GracefulRestart time.Duration
	// Log receives the speaker's own lines (peer state changes, announce,
	// withdraw); GoBGP's lines go to it at warning level and above.
	Log *slog.Logger `json:"-"`
	// OnPeerChange, if set, is called after each peer state change, on a
	// GoBGP goroutine; it must not block and must not call Close or Detach.
	OnPeerChange func(PeerStatus) `json:"-"`
	// BFDCarried are the BFD sessions a predecessor process ran
	// (BFDExport): each peer's session resumes in its carried state.
	BFDCarried []bfd.Carried `json:"-"`
	// BFD are sessions started ahead of the speaker (StartBFD, a
	// hand-over); the speaker takes them over instead of starting its
	// own, and BFDCarried is then unused.
	BFD *BFDSessions `json:"-"`
	// Restarting starts the speaker in place of one that Detached (a
	// process hand-over; needs GracefulRestart): the first OPEN to each
	// peer sets the graceful-restart Restart State bit and, for the
	// peer's address family, the Forwarding State bit, so the router
	// keeps the routes it holds from the predecessor, stale, until this
	// speaker's End-of-RIB replaces them (doc.go "Leaving").
	Restarting bool
	// Announce are prefixes announced before any peer is added, so the
	// first UPDATE each router gets, ahead of its End-of-RIB, carries
	// them: a restarting speaker's End-of-RIB without a prefix takes the
	// router's stale route to it away.
	Announce []netip.Prefix
}

// Peer is one router to announce to.
type Peer struct {
	Address      netip.Addr
	AS           uint32
	Port         uint16 // 0 = 179
	Password     string // TCP MD5; "" = none
	EBGPMultihop uint8  // TTL of a multihop eBGP session; 0 = directly connected
	Passive      bool   // wait for the router to connect
	// BFD, when Multiplier > 0, runs an RFC 5880/5881 single-hop BFD
	// session to the peer in this process; its Down closes the BGP
	// session until it is Up again (bfd.go).
	BFD BFD
}

// Attributes are attached to every announcement. Every appliance of a fleet
// must announce the same ones, or the routers do not merge the paths.
type Attributes struct {
	MED              uint32
	Communities      []uint32 // wire form: AS<<16 | value
	LargeCommunities []LargeCommunity
}

// LargeCommunity is an RFC 8092 large community.
type LargeCommunity struct{ Global, Local1, Local2 uint32 }

func (a Attributes) equal(b Attributes) bool {
	return a.MED == b.MED && slices.Equal(a.Communities, b.Communities) && slices.Equal(a.LargeCommunities, b.LargeCommunities)
}

// PeerStatus is what `xlb status` shows of one peer.
type PeerStatus struct {
	Address     netip.Addr
	AS          uint32
	State       string    // idle, connect, active, opensent, openconfirm, established
	Since       time.Time // when State was entered (uptime while established)
	Announced   []netip.Prefix
	LastError   string // why the session last went down, "" if never
	LastErrorAt time.Time
	// BFD is the BFD session's state (down, init, up, admin_down); ""
	// when the peer runs none.
	BFD string `json:",omitempty"`
}

// Established reports whether the session is up.
func (p PeerStatus) Established() bool { return p.State == "established" }

// Speaker is an embedded BGP speaker that originates host routes (the VIPs)
// and imports nothing. Its methods are safe for concurrent use.
type Speaker struct {
	srv  *server.BgpServer
	log  *slog.Logger
	opts Options

	mu        sync.Mutex
	peers     map[netip.Addr]*peerState
	announced map[netip.Prefix]uuid.UUID
	attrs     Attributes
	stopped   bool
	cancel    context.CancelFunc
	bfd       *bfd.Server // nil until a peer runs BFD

	bfdMu   sync.Mutex
	bfdHeld map[netip.Addr]bool // BGP peers disabled because BFD left Up
	// bfdFrozen holds the sessions' states while HoldBFD holds: their
	// changes meanwhile touch no BGP session.
	bfdFrozen map[netip.Addr]bfd.State
	// bfdSettling names the peers whose admin state settleAdmin follows.
	bfdSettling map[netip.Addr]bool
}

type peerState struct {
	conf      Peer
	state     gbgp.FSMState
	since     time.Time
	lastErr   string
	lastErrAt time.Time
}

// Start starts a speaker and adds its peers; it connects to them in the
// background. It announces nothing until Announce.
func Start(ctx context.Context, o Options) (*Speaker, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	lvl := &slog.LevelVar{}
	lvl.Set(slog.LevelWarn)
	srv := server.NewBgpServer(server.LoggerOption(slog.New(quietHandler{o.Log.Handler()}).With("component", "gobgp"), lvl))
	go srv.Serve()
	wctx, cancel := context.WithCancel(context.Background())
	s := &Speaker{srv: srv, log: o.Log, opts: o, peers: map[netip.Addr]*peerState{}, announced: map[netip.Prefix]uuid.UUID{}, attrs: o.Attrs, cancel: cancel, bfdHeld: map[netip.Addr]bool{}, bfdSettling: map[netip.Addr]bool{}}

	listen := int32(-1)
	switch {
	case o.ListenPort > 0:
		listen = int32(o.ListenPort)
	case o.ListenPort == 0 && slices.ContainsFunc(o.Peers, func(p Peer) bool { return p.Passive }):
		listen = 179
	}
	global := &api.Global{Asn: o.LocalAS, RouterId: o.RouterID.String(), ListenPort: listen}
	if o.GracefulRestart > 0 {
		global.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(o.GracefulRestart / time.Second)}
	}
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: global}); err != nil {
		cancel()
		srv.Stop()
		return nil, fmt.Errorf("start bgp: %w", err)
	}
	if err := importNothing(ctx, srv); err != nil {
		s.stop(false)
		return nil, err
	}
	if err := srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{OnPeerUpdate: s.onPeer}, server.WatchPeer()); err != nil {
		s.stop(false)
		return nil, fmt.Errorf("watch bgp peers: %w", err)
	}
	if err := s.Update(o.Announce, nil); err != nil {
		s.stop(false)
		return nil, err
	}
	err := s.SetPeers(ctx, o.Peers)
	// Only the peers of the hand-over restart: a peer a reload adds later,
	// or a session that resets later, says nothing was kept.
	s.mu.Lock()
	s.opts.Restarting = false
	s.mu.Unlock()
	if err != nil {
		s.stop(false)
		return nil, err
	}
	return s, nil
}

// importNothing rejects every path received from any peer: the appliance
// only originates its VIPs. GoBGP runs locally added paths through the
// global import policy too, so a default REJECT would drop them; a
// neighbor set matching every address matches received paths only (local
// paths have no neighbor).
func importNothing(ctx context.Context, srv *server.BgpServer) error {
	const set, policy = "xlb-any-neighbor", "xlb-import-nothing"
	if err := srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
		DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: set, List: []string{"0.0.0.0/0", "::/0"},
	}}); err != nil {
		return fmt.Errorf("bgp import policy: %w", err)
	}
	if err := srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: policy, Statements: []*api.Statement{{
		Name:       "reject-received",
		Conditions: &api.Conditions{NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: set}},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
	}}}}); err != nil {
		return fmt.Errorf("bgp import policy: %w", err)
	}
	if err := srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT,
		Policies: []*api.Policy{{Name: policy}}, DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
	}}); err != nil {
		return fmt.Errorf("bgp import policy: %w", err)
	}
	return nil
}

func (o *Options) validate() error {
	switch {
	case o.LocalAS == 0:
		return errors.New("bgp: local AS is 0")
	case !o.RouterID.Is4() || o.RouterID.IsUnspecified():
		return fmt.Errorf("bgp: router id %v is not an IPv4 address", o.RouterID)
	case o.HoldTime < 3*time.Second || o.HoldTime%time.Second != 0:
		return fmt.Errorf("bgp: hold time %v: want whole seconds, at least 3", o.HoldTime)
	}
	return nil
}

// keepalive is a third of the hold time, at least one second.
func (o *Options) keepalive() uint64 { return max(1, uint64(o.HoldTime/time.Second)/3) }

func (s *Speaker) apiPeer(p Peer) *api.Peer {
	fam := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	if p.Address.Is6() {
		fam = &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
	}
	ap := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: p.Address.String(), PeerAsn: p.AS, AuthPassword: p.Password},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime: uint64(s.opts.HoldTime / time.Second), KeepaliveInterval: s.opts.keepalive(),
			// GoBGP's default is 120 s; it retries no faster than every 2 s anyway.
			ConnectRetry: min(5, s.opts.keepalive()*2),
		}},
		AfiSafis: []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: fam, Enabled: true}}},
	}
	if p.Port != 0 && p.Port != 179 {
		ap.Transport = &api.Transport{RemotePort: uint32(p.Port)}
	}
	if p.Passive {
		if ap.Transport == nil {
			ap.Transport = &api.Transport{}
		}
		ap.Transport.PassiveMode = true
	}
	if p.EBGPMultihop > 0 {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.EBGPMultihop)}
	}
	if s.opts.GracefulRestart > 0 {
		// A restarting speaker (Options.Restarting) says it restarted and
		// kept forwarding (GoBGP sets the Forwarding State bit with the
		// Restart State bit), and GoBGP then holds its UPDATEs until every
		// peer's End-of-RIB or the deferral timer: 0, as this speaker
		// imports nothing and so has no route selection to wait for.
		ap.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(s.opts.GracefulRestart / time.Second), LocalRestarting: s.opts.Restarting, DeferralTime: 0}
		ap.AfiSafis[0].MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
	}
	return ap
}

// SetPeers makes the peer list p: new peers are added, missing ones removed
// (with a NOTIFICATION, so that router drops our routes at once), changed
// ones re-added.
func (s *Speaker) SetPeers(ctx context.Context, peers []Peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[netip.Addr]Peer{}
	for _, p := range peers {
		want[p.Address] = p
	}
	var errs []error
	for addr, ps := range s.peers {
		if np, ok := want[addr]; ok && np == ps.conf {
			continue
		}
		s.stopBFD(ps.conf)
		if err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
			errs = append(errs, fmt.Errorf("remove bgp peer %s: %w", addr, err))
			continue
		}
		delete(s.peers, addr)
		s.log.Info("bgp peer removed", "peer", addr)
	}
	for _, p := range peers {
		if _, ok := s.peers[p.Address]; ok {
			continue
		}
		// BFD first: a session taken over from StartBFD that left Up
		// meanwhile has the peer added disabled (onBFD).
		if err := s.startBFD(p); err != nil {
			errs = append(errs, err)
		}
		ap := s.apiPeer(p)
		ap.Conf.AdminDown = s.bfdHolds(p.Address)
		if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: ap}); err != nil {
			s.stopBFD(p)
			errs = append(errs, fmt.Errorf("add bgp peer %s: %w", p.Address, err))
			continue
		}
		s.peers[p.Address] = &peerState{conf: p, state: gbgp.BGP_FSM_IDLE, since: time.Now()}
		s.log.Info("bgp peer added", "peer", p.Address, "peer_as", p.AS, "passive", p.Passive, "held_by_bfd", ap.Conf.AdminDown)
	}
	return errors.Join(errs...)
}

// onPeer records a peer's state change (on a GoBGP goroutine).
func (s *Speaker) onPeer(ev *apiutil.WatchEventMessage_PeerEvent, at time.Time) {
	if ev.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	st := ev.Peer.State
	s.mu.Lock()
	ps := s.peers[st.NeighborAddress]
	if ps == nil || ps.state == st.SessionState || s.stopped {
		s.mu.Unlock()
		return
	}
	old := ps.state
	ps.state, ps.since = st.SessionState, at
	// A session that went down, or a failure on the way up; leaving IDLE
	// when the idle hold timer runs out is no error.
	if old == gbgp.BGP_FSM_ESTABLISHED || (st.DisconnectReason != api.PeerState_DISCONNECT_REASON_UNSPECIFIED && st.DisconnectReason != api.PeerState_DISCONNECT_REASON_IDLE_TIMER_EXPIRED) {
		if msg := disconnectText(st.DisconnectReason, st.DisconnectMessage); msg != "" {
			ps.lastErr, ps.lastErrAt = msg, at
		}
	}
	status := s.statusLocked(ps)
	cb := s.opts.OnPeerChange
	s.mu.Unlock()
	switch {
	case st.SessionState == gbgp.BGP_FSM_ESTABLISHED:
		s.log.Info("bgp session established", "peer", st.NeighborAddress, "peer_as", st.PeerASN, "announced", len(status.Announced))
	case old == gbgp.BGP_FSM_ESTABLISHED:
		s.log.Warn("bgp session down", "peer", st.NeighborAddress, "state", stateName(st.SessionState), "reason", status.LastError)
	}
	if cb != nil {
		cb(status)
	}
}

func disconnectText(r api.PeerState_DisconnectReason, msg string) string {
	name := strings.ToLower(strings.TrimPrefix(r.String(), "DISCONNECT_REASON_"))
	name = strings.ReplaceAll(name, "_", " ")
	switch {
	case r == api.PeerState_DISCONNECT_REASON_UNSPECIFIED && msg == "":
		return ""
	case r == api.PeerState_DISCONNECT_REASON_UNSPECIFIED:
		return msg
	case msg == "" || strings.EqualFold(msg, name):
		return name
	}
	return name + ": " + msg
}

func stateName(s gbgp.FSMState) string {
	switch s {
	case gbgp.BGP_FSM_IDLE:
		return "idle"
	case gbgp.BGP_FSM_CONNECT:
		return "connect"
	case gbgp.BGP_FSM_ACTIVE:
		return "active"
	case gbgp.BGP_FSM_OPENSENT:
		return "opensent"
	case gbgp.BGP_FSM_OPENCONFIRM:
		return "openconfirm"
	case gbgp.BGP_FSM_ESTABLISHED:
		return "established"
	}
	return "unknown"
}

func (s *Speaker) statusLocked(ps *peerState) PeerStatus {
	st := PeerStatus{Address: ps.conf.Address, AS: ps.conf.AS, State: stateName(ps.state), Since: ps.since, LastError: ps.lastErr, LastErrorAt: ps.lastErrAt}
	if ps.state == gbgp.BGP_FSM_ESTABLISHED {
		for p := range s.announced {
			if p.Addr().Is4() == ps.conf.Address.Is4() {
				st.Announced = append(st.Announced, p)
			}
		}
		slices.SortFunc(st.Announced, comparePrefix)
	}
	return st
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// Peers returns the state of every peer, sorted by address.
func (s *Speaker) Peers() []PeerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PeerStatus, 0, len(s.peers))
	for _, ps := range s.peers {
		st := s.statusLocked(ps)
		st.BFD = s.bfdState(ps.conf)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b PeerStatus) int { return a.Address.Compare(b.Address) })
	return out
}

// Announced returns the prefixes being announced, sorted.
func (s *Speaker) Announced() []netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]netip.Prefix, 0, len(s.announced))
	for p := range s.announced {
		out = append(out, p)
	}
	slices.SortFunc(out, comparePrefix)
	return out
}

// HostPrefix is the /32 or /128 of a VIP.
func HostPrefix(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen())
}

func (s *Speaker) path(p netip.Prefix) (*apiutil.Path, error) {
	nlri, err := gbgp.NewIPAddrPrefix(p)
	if err != nil {
		return nil, err
	}
	attrs := []gbgp.PathAttributeInterface{gbgp.NewPathAttributeOrigin(0)}
	fam := gbgp.RF_IPv4_UC
	if p.Addr().Is4() {
		// Unspecified next hop: GoBGP puts the session's own address.
		nh, err := gbgp.NewPathAttributeNextHop(netip.IPv4Unspecified())
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, nh)
	} else {
		fam = gbgp.RF_IPv6_UC
		mp, err := gbgp.NewPathAttributeMpReachNLRI(fam, []gbgp.PathNLRI{{NLRI: nlri}}, netip.IPv6Unspecified())
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, mp)
	}
	a := s.attrs
	attrs = append(attrs, gbgp.NewPathAttributeMultiExitDisc(a.MED))
	if len(a.Communities) > 0 {
		attrs = append(attrs, gbgp.NewPathAttributeCommunities(a.Communities))
	}
	if len(a.LargeCommunities) > 0 {
		lcs := make([]*gbgp.LargeCommunity, len(a.LargeCommunities))
		for i, c := range a.LargeCommunities {
			lcs[i] = gbgp.NewLargeCommunity(c.Global, c.Local1, c.Local2)
		}
		attrs = append(attrs, gbgp.NewPathAttributeLargeCommunities(lcs))
	}
	return &apiutil.Path{Family: fam, Nlri: nlri, Attrs: attrs}, nil
}

// Announce originates prefix (a VIP's host prefix) to every peer of its
// family. Announcing an announced prefix does nothing.
func (s *Speaker) Announce(prefix netip.Prefix) error { return s.Update([]netip.Prefix{prefix}, nil) }

// Withdraw stops announcing prefix. Withdrawing what is not announced does
// nothing.
func (s *Speaker) Withdraw(prefix netip.Prefix) error { return s.Update(nil, []netip.Prefix{prefix}) }

// WithdrawAll withdraws every prefix, in one batch.
func (s *Speaker) WithdrawAll() error { return s.Update(nil, s.Announced()) }

// Update announces the prefixes of announce that are not announced yet
// and withdraws those of withdraw that are, as one batch: one call into
// GoBGP for the announcements and one for the withdrawals, so GoBGP's
// sender, which packs the paths queued for a peer into as few UPDATEs as
// 4096 bytes allow, finds them together
// (docs/design.md#vip-announcements-at-scale). A withdrawal goes by path:
// by UUID GoBGP walks its whole table for each one. Errors name the
// prefixes they concern; what succeeded stays done.
func (s *Speaker) Update(announce, withdraw []netip.Prefix) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		if len(announce) > 0 {
			return errors.New("bgp: speaker stopped")
		}
		return nil
	}
	var add []netip.Prefix
	for _, p := range announce {
		if _, ok := s.announced[p]; !ok && !slices.Contains(add, p) {
			add = append(add, p)
		}
	}
	var del []netip.Prefix
	for _, p := range withdraw {
		if _, ok := s.announced[p]; ok && !slices.Contains(del, p) {
			del = append(del, p)
		}
	}
	return errors.Join(s.deleteLocked(del), s.addLocked(add))
}

// addLocked adds the paths of prefixes to GoBGP in one request (an
// announced prefix is replaced: its attributes changed).
func (s *Speaker) addLocked(prefixes []netip.Prefix) error {
	if len(prefixes) == 0 {
		return nil
	}
	paths, err := s.paths(prefixes, false)
	if err != nil {
		return err
	}
	resp, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: paths})
	var errs []error
	for i, r := range resp {
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("announce %s: %w", prefixes[i], r.Error))
			continue
		}
		s.announced[prefixes[i]] = r.UUID
	}
	if err != nil && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("announce %s: %w", describe(prefixes), err))
	}
	return errors.Join(errs...)
}

// deleteLocked withdraws prefixes in one request, by path: a withdrawal
// by UUID walks GoBGP's whole table for each UUID.
func (s *Speaker) deleteLocked(prefixes []netip.Prefix) error {
	if len(prefixes) == 0 {
		return nil
	}
	paths, err := s.paths(prefixes, true)
	if err != nil {
		return err
	}
	if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: paths}); err != nil {
		return fmt.Errorf("withdraw %s: %w", describe(prefixes), err)
	}
	for _, p := range prefixes {
		delete(s.announced, p)
	}
	return nil
}

// paths are the announcements (or withdrawals) of prefixes.
func (s *Speaker) paths(prefixes []netip.Prefix, withdraw bool) ([]*apiutil.Path, error) {
	what := map[bool]string{false: "announce", true: "withdraw"}[withdraw]
	out := make([]*apiutil.Path, 0, len(prefixes))
	for _, prefix := range prefixes {
		p, err := s.path(prefix)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, prefix, err)
		}
		p.Withdrawal = withdraw
		out = append(out, p)
	}
	return out, nil
}

// describe names a batch of prefixes in an error: the first, and how
// many more.
func describe(prefixes []netip.Prefix) string {
	if len(prefixes) == 1 {
		return prefixes[0].String()
	}
	return fmt.Sprintf("%s and %d more", prefixes[0], len(prefixes)-1)
}

// SetAttributes changes the attributes of every announcement; announced
// prefixes are sent again with them (an implicit withdraw at the routers),
// in one batch.
func (s *Speaker) SetAttributes(a Attributes) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attrs.equal(a) {
		return nil
	}
	s.attrs = a
	all := make([]netip.Prefix, 0, len(s.announced))
	for p := range s.announced {
		all = append(all, p)
	}
	slices.SortFunc(all, comparePrefix)
	return s.addLocked(all)
}

// UpdatesSent returns the UPDATE messages sent to each peer since its
// session came up, as GoBGP counts them (End-of-RIB included): what a
// batch of announcements cost on the wire.
func (s *Speaker) UpdatesSent(ctx context.Context) (map[netip.Addr]uint64, error) {
	out := map[netip.Addr]uint64{}
	err := s.srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		if p.State == nil || p.State.Messages == nil || p.State.Messages.Sent == nil {
			return
		}
		if a, err := netip.ParseAddr(p.State.NeighborAddress); err == nil {
			out[a] = p.State.Messages.Sent.Update
		}
	})
	return out, err
}

// Close ends every session with a NOTIFICATION (Cease), so the routers drop
// this speaker's routes at once, and stops the speaker. Callers that want
// the routers to move traffic gently withdraw first and wait (the daemon's
// withdraw_delay) before they Close.
func (s *Speaker) Close() { s.stop(false) }

// Detach stops the speaker without withdrawing and without a NOTIFICATION
// (nor a BFD AdminDown: a successor resumes the sessions, BFDExport)
// where graceful restart was negotiated: such routers keep the routes
// (marked stale) for the restart time, until a successor speaker with the
// same identity re-announces them and sends End-of-RIB. Routers without
// graceful restart drop the routes when the TCP connection closes, as after
// a crash. It is the building block of a process hand-over.
func (s *Speaker) Detach() { s.stop(true) }

func (s *Speaker) stop(graceful bool) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	b := s.bfd
	s.mu.Unlock()
	switch {
	case b != nil && graceful:
		b.Detach() // silent: the successor resumes the sessions (bfd.go)
	case b != nil:
		b.Close() // AdminDown: the routers do not take it for a failure
	}
	if err := s.srv.StopBgp(context.Background(), &api.StopBgpRequest{AllowGracefulRestart: graceful}); err != nil {
		s.log.Warn("stop bgp", "err", err)
	}
	s.cancel()
	s.srv.Stop()
}
