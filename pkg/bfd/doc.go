// Package bfd is Bidirectional Forwarding Detection (RFC 5880) for the
// appliance's BGP sessions: single hop (RFC 5881), asynchronous mode, no
// Echo, no Demand, no authentication. A BFD session to each router that
// asks for it lets a silent appliance (hung, SIGSTOPped, link down) leave
// the routers' ECMP in Multiplier × interval (0.3 s with 100 ms × 3)
// instead of the BGP hold time (2-3 s with 3 s).
//
// # Why our own, not GoBGP's
//
// GoBGP v4.8.0 carries a BFD server (pkg/server/bfd_*.go, "partial
// implementation") wired to its peers. Against BIRD in the fleet lab
// (TestBIRDBFD) it came Up and the router dropped a SIGSTOPped speaker
// within its detection time, but the speaker never came back: on BFD Down it
// calls ResetPeer, whose NOTIFICATION waits in the FSM's queue while the
// BGP session is down and ends the next session the moment it is
// established; BIRD then replaces its BFD session (new discriminator),
// which GoBGP's Up session ignores until it expires and resets again, for
// good. It also sends Poll without waiting for Final, never slows to 1 s
// while not Up, and does not check the received TTL (RFC 5881 §5). This
// package is small (the 24-byte packet, the state machine, the sockets),
// and the speaker couples it to BGP itself (pkg/bgp bfd.go: a BFD Down
// disables the BGP peer until BFD is Up again).
//
// # What it does
//
//   - packet.go: the control packet and the reception checks that need no
//     session (RFC 5880 §6.8.6): version 1, length, no A bit (no
//     authentication configured), no M bit, detect multiplier and My
//     Discriminator nonzero, Your Discriminator zero only in Down or
//     AdminDown.
//   - session.go: one session's state machine, without I/O or clock (the
//     caller passes the time): Down → Init → Up, Down on detection timeout
//     (diag 1) or when the remote says Down or AdminDown (diag 3); the
//     transmit interval is 1 s while not Up, then min_tx, changed with a
//     Poll Sequence (a decrease applies at once, an increase when the
//     Final arrives, §6.8.3); a received Poll is answered with a Final at
//     once; each packet goes out at 75-100 % of the agreed interval (90 %
//     with multiplier 1, §6.8.7); the detection time is the remote's
//     multiplier × max(our min_rx, the remote's desired tx).
//   - server.go: one goroutine per session owning its Session and a
//     socket from a random source port in 49152-65535 with TTL / hop
//     limit 255 (RFC 5881 §4-5); one receive socket per address family on
//     UDP 3784 that drops any packet whose TTL is not 255 (GTSM) and hands
//     the rest to the session of the source address. Closing a session
//     sends AdminDown, which RFC 5882 §3.2 says a router must not take
//     for a failure. BIRD 2.0.12 does take it for one (the route to
//     the VIP was gone for about 1.7 s at xlb restart), hence
//     the hand-over below, which sends no AdminDown.
//   - The detection time counts the router's silence, not this
//     process's: the receive sockets ask the kernel for each packet's
//     arrival time (SO_TIMESTAMPNS), a session refreshes its deadline from
//     it, and a session whose deadline passed first takes what its inbox
//     holds, then, while the receive path still holds packets (read and
//     not yet handed over, or in the socket: SIOCINQ), looks again every
//     5 ms, for at most a second or one detection time if longer (a
//     silent router among talking ones can be declared that much later).
//     Only the verdict waits: the session sends on its interval meanwhile,
//     or the router's own detection time would run out instead
//     (TestServerSendsWhileDetectionWaits).
//     A full inbox gives up its
//     oldest packet, not the newest. A machine too busy to run the
//     process for longer than the detection time (a hand-over's successor
//     starting on two busy CPUs did) so takes no session down whose router
//     kept sending (TestServerBusyProcess holds the process up for three
//     detection times).
//   - carry.go: the hand-over (xlb restart / upgrade). See "Hand-over".
//   - server_test.go drives the sockets on loopback against a fake router
//     (TTL 255 sent, source port range, TTL 64 dropped, AdminDown on
//     removal); pkg/bgp TestBIRDBFD against BIRD 2.0.12.
//
// # Hand-over
//
// The sessions cross a process hand-over without the router seeing them
// go down. The predecessor's daemon puts Server.Export (per session: peer,
// source port, state, both discriminators, the remote's multiplier and
// intervals, our advertised interval) into its state document ("bfd",
// absent in older documents: the sessions start over) while its sessions
// run on untouched, so a successor that fails before the cut-over changes
// nothing, and again as they are at the cut-over in the CUTOVER message
// (a session the router restarted during the successor's preparation,
// seconds on a busy machine, has another discriminator by then). The
// successor resumes them at the cut-over, before it tells the predecessor
// it is done (pkg/bgp StartBFD: Resume, then Add): each session starts Up
// with the carried discriminators and sends at once; it may not time out
// before ResumeGrace (3 s) unless a packet came (ResumeSession), as the
// predecessor's socket may get the router's packets until it closes. Then
// the predecessor's speaker detaches: Server.Detach ends its sessions
// without a packet (the last one the router got said Up). For the moment in
// between both processes send the same session's packets, which the router
// takes as one session; a successor that resumed them later (when its BGP
// speaker started) left the router's sessions silent for longer than their
// detection time on a busy machine.
//
// Sockets: every BFD socket, the receive sockets on 3784 and the
// per-session send sockets, has SO_REUSEPORT, so the successor binds 3784
// and the session's source port (RFC 5881 §4: one source port per session)
// while the predecessor still holds them. Chosen over passing the fds in
// the hand-over's file list because it needs no plumbing through the daemon
// and speaker and has no fd ownership to get wrong; while both processes
// hold 3784 the kernel hands a router's packets to one of the two sockets,
// and the other gets them once the predecessor closes its own (right after
// the cut-over; a resumed session waits ResumeGrace for them, as a busy
// machine may take the predecessor longer than a detection time to close
// it). A predecessor built before this (no SO_REUSEPORT) keeps the port
// until it exits: the successor's session then falls back to a new source
// port, and its receive socket retries every second, so an upgrade from
// such a build can still drop the session once. Whether BIRD 2.0.12 checks
// the source port was not checked; RFC 5881 asks for it and keeping it
// costs nothing.
//
// # Decisions where the RFCs leave a choice
//
//   - The BFD session lives and dies with the xlb process (a
//     separate responder would keep the router believing in a hung
//     daemon). A SIGSTOPped daemon stops sending and the router's BFD
//     drops it.
//   - Port 3784 taken (another BFD daemon; a predecessor built before
//     the hand-over set SO_REUSEPORT): the receive socket is retried every second; the session
//     stays Down meanwhile and the BGP session is not held down for it
//     (only a session that was Init or Up holds BGP down when it drops).
//   - Dropped packets (wrong TTL, unknown source, malformed) are counted
//     (Server.Dropped), not logged: a flood must not flood the log.
//   - Remote discriminators are learnt from the first packet; a session
//     whose remote restarts (new discriminator, Your Discriminator 0,
//     state Down) goes Down and comes back Up with the new one.
package bfd
