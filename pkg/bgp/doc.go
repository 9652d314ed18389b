// Package bgp announces the appliance's VIPs to the routers: an embedded
// BGP speaker (GoBGP as a library) that originates one host route per VIP
// (/32 or /128) and imports nothing, so routers can spread a VIP over a
// fleet of appliances with ECMP (docs/design.md#the-fleet: every table is a
// pure function of its inputs).
//
// # Which GoBGP, and why
//
// github.com/osrg/gobgp/v4 v4.8.0 (the newest the module proxy serves; v3
// ends at v3.37.0). Reasons: the daemon logs with log/slog and v4 takes a
// *slog.Logger natively (v3 wants its own Logger interface); v4 speaks
// net/netip and native path attributes instead of anypb-wrapped protobufs;
// the project's Go (1.26) meets v4's go 1.25 floor. The behaviour the
// fleet prototype measured with v3.37.0 is unchanged where it matters: the
// FSM's fixed 5 s idle hold after a session drop (holdtimeIdle) and the
// 2 s floor on connect retries (minConnectRetryInterval) are the same in
// v4.8.0.
//
// # Ownership and goroutines
//
// A Speaker owns one GoBGP server (its own goroutines: the server loop, one
// FSM per peer, the event watcher). Its methods are safe from any
// goroutine; the daemon calls them from its control goroutine. Peer state
// changes arrive on a GoBGP goroutine (OnPeerChange) and are kept under the
// Speaker's mutex for Peers. Nothing here is on the packet path.
//
// # What is sent
//
//   - One path per announced prefix: ORIGIN IGP, MED (always sent, default
//     0, so that every appliance of a fleet sends the same), the configured
//     communities and large communities, next hop unspecified, which GoBGP
//     replaces by the session's own address (eBGP and iBGP alike). AS_PATH
//     is the local AS on eBGP and empty on iBGP. Routers merge paths into
//     one ECMP route only when these attributes are equal on every
//     appliance (measured with BIRD in the fleet prototype: a different MED
//     or AS path length is not merged).
//   - IPv4 prefixes go to peers with an IPv4 address (ipv4-unicast), IPv6
//     prefixes to peers with an IPv6 address (ipv6-unicast, MP-BGP): the
//     next hop must be an address of the session's family, which a single
//     IPv4 session cannot give for IPv6 (GoBGP would send an IPv4-mapped
//     next hop that routers cannot resolve).
//   - Nothing is imported: a global import policy rejects every path whose
//     source is a neighbour (a neighbour set matching every address; local
//     paths have no neighbour and pass — a plain default REJECT would
//     reject our own paths too, since GoBGP runs AddPath through the global
//     import policy).
//   - Announcements and withdrawals go to GoBGP in batches (Update: one
//     AddPath, one DeletePath by path), so its sender can pack them into
//     few UPDATEs; UpdatesSent counts them per peer
//     (docs/design.md#vip-announcements-at-scale).
//   - TCP port 179 is listened on only when a peer is passive (ListenPort
//     0); otherwise the speaker connects out and never listens, so it
//     cannot clash with another BGP daemon on the appliance.
//   - Timers: hold time as configured (≥ 3 s, whole seconds), keepalive a
//     third of it (≥ 1 s), connect retry min(5 s, 2 × keepalive) instead of
//     GoBGP's 120 s (GoBGP retries no faster than every 2 s). The negotiated
//     hold time is the smaller of both sides', so a router with a longer
//     default still detects a silent appliance within ours.
//
// # BFD
//
// A peer with Peer.BFD runs a BFD session (pkg/bfd, our own: doc.go there
// says why not GoBGP v4's) in this process, started and stopped with the
// peer by SetPeers. When the session leaves Up (the router went silent or
// said Down), the speaker disables the GoBGP peer: the BGP session ends at
// once (NOTIFICATION Cease, administrative shutdown) and does not
// reconnect until BFD is Up again, which enables it (RFC 5882 §4.3). The
// router does the same on its side, so a silent appliance leaves ECMP in
// the router's detection time (0.25-0.31 s with 100 ms × 3, TestBIRDBFD).
// GoBGP keeps one pending admin-state request per peer and drops the next
// while it waits: after a SIGSTOP the session went Down and Up within
// milliseconds, the enable was dropped and the peer stayed disabled (a
// lab run, TestFleetBFD). After every change the speaker therefore reads
// the peer's admin state until it has agreed with the BFD session three
// times in a row, 100 ms apart, asking again when it does not
// (settleAdmin, TestAdminStateSettles).
// A session that never came Up holds nothing: a router without BFD still
// gets its BGP session. Close and Detach end the BFD sessions with
// AdminDown, which RFC 5882 §3.2 says routers must not take for a failure
// (a Detach with BFD is not tested yet). PeerStatus.BFD is
// the session's state.
//
// # Leaving: Close, Detach, and a process hand-over
//
// Close ends every session with a NOTIFICATION (Cease): routers drop our
// routes at once. The daemon withdraws every VIP first, waits
// withdraw_delay so the routers have moved the flows, then Closes.
//
// Detach stops without withdrawing and, where graceful restart (RFC 4724)
// was negotiated (Options.GracefulRestart > 0), without a NOTIFICATION:
// the routers keep our routes, marked stale, for the restart time, until a
// successor speaker re-announces them (TestDetachKeepsRoutes drives this
// against a GoBGP helper). This is the BGP half of a restart without loss
// (docs/design.md#bgp-across-a-hand-over): the old process Detaches after the
// successor has taken the data plane over; the successor starts a Speaker
// with the same identity and GracefulRestart, announces the VIPs once its
// tables match (the daemon's announce conditions), and the routers never see
// a withdraw. Without graceful restart at the routers, Detach behaves as a
// crash: the routes go when the TCP connection closes (about 10 ms with BIRD)
// and come back when the successor announces.
//
// The successor's speaker must say what it is, or a router drops the stale
// routes the moment the new session comes up: RFC 4724 §4.2 has a
// receiving speaker remove them at once when the new OPEN's
// graceful-restart capability lacks the Forwarding State bit for the
// family, and BIRD does (the route then blinks until the first UPDATE: a
// few milliseconds, seconds on a busy machine). Options.Restarting makes
// the first OPEN to each peer carry the Restart State bit and the
// Forwarding State bit (true: the data plane forwarded throughout), and
// GoBGP then sends its routes and End-of-RIB only after the peers' own
// End-of-RIB or its deferral timer, set to 0 (this speaker imports nothing,
// so it has no route selection to wait for). Options.Announce puts the
// VIPs in before any peer is added, so that first UPDATE, ahead of the
// End-of-RIB that ends the router's stale routes, carries them whatever
// the timing. Only the peers Start adds are restarting: a session that
// resets later, or a peer a reload adds, says nothing was kept.
//
// BFD across a hand-over (bfd.go): StartBFD resumes the predecessor's BFD
// sessions ahead of the speaker, at the cut-over, and Options.BFD hands
// them to it when it starts; the predecessor's speaker holds its BFD
// reactions meanwhile (HoldBFD), since the successor's socket may take the
// router's BFD packets before the predecessor Detaches. A router whose BFD
// session hears nothing for its detection time takes the BGP session down
// with it, graceful restart or not (BIRD 2.0.12 does), and a speaker that
// resumed the sessions only when it started did so 0.5 s after the
// predecessor fell silent on a busy machine. TestBIRDHandOver runs the
// whole sequence against BIRD with the successor's speaker a second late.
package bgp
