// Package handover moves a running xlb's live state to its successor
// process: the conversation, not what is said. The daemon (pkg/daemon)
// decides what the files and documents are; this package carries them,
// with a deadline on every step, so that any failure before the cut-over
// leaves the running process serving, untouched.
//
// # The conversation
//
// The running process (Predecessor) starts its successor (Start: the
// same binary for `xlb restart`, another for `xlb upgrade`) with one end
// of an AF_UNIX SOCK_SEQPACKET socketpair as fd 3, named by EnvFD in its
// environment. Each message is one datagram of JSON, fds attached with
// SCM_RIGHTS and named in the message:
//
//	successor                         predecessor
//	HELLO {protocol, pid, build,  ─▶   checks protocol and pid
//	       state versions it reads}
//	                              ◀─   FILES {names} + fds, ≤ 200 per message
//	                              ◀─   OFFER {state version, reason} + the
//	                                     state document in a sealed memfd
//	prepares, while the predecessor
//	keeps forwarding
//	READY, or ABORT {reason}      ─▶   (ABORT: successor exits, predecessor
//	                                     carries on as if nothing happened)
//	                                   workers stop at a batch boundary
//	                              ◀─   CUTOVER {body: what the workers hand over}
//	takes over, or FAILED {reason} ─▶  (FAILED: nothing was touched; the
//	DONE                                 predecessor resumes its workers)
//	                                   predecessor exits without detaching
//
// Every receive has a deadline (Timeouts: HELLO 15 s, preparation 60 s
// unless the caller sets another — pkg/daemon allows 5 minutes, since it
// serves on in full meanwhile — every other step 5 s); a successor that overruns one, or exits, is
// killed and reaped by Abandon and the error says which step failed. A
// successor's own refusal is a *RefusedError carrying its reason, which
// `xlb restart` prints. Only an error after CUTOVER other than FAILED
// (no answer, the successor died) leaves it unknown whether the successor
// started driving the rings; the daemon handles that as a crash.
//
// # Decisions where the design is silent
//
//   - The state document travels in a memfd sealed against writes, not in
//     the message: it can be any size, and SEQPACKET datagrams are bounded
//     by the socket buffer.
//   - BPF objects are not sent: they are pinned (ring/xsk), and the
//     successor opens the pins, which also serves a restart after a crash.
//   - Versions: the protocol must match exactly; state documents are
//     versioned separately (ChooseState picks the highest both know; none
//     in common means the successor starts its control-plane state cold
//     and still takes the sockets and arenas, which are kernel ABI).
//   - The successor checks that the connection was created by its parent
//     (SO_PEERCRED of a socketpair names its creator); the predecessor
//     checks that HELLO comes from the pid it started.
//   - The successor's stdout and stderr must be files, so its output does
//     not depend on a goroutine of the process that is about to exit.
//   - Received fds are close-on-exec; Offer.Take hands one to its owner,
//     Offer.Close closes those nobody took.
package handover
