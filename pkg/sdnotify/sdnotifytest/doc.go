// Package sdnotifytest stands in for the parts of systemd a Type=notify
// daemon talks to, where systemd cannot run as PID 1 (tests, a benchmark
// in a lab namespace): the notification socket (NOTIFY_SOCKET) with its
// file descriptor store (FDSTORE=1 keeps the fds passed under their
// FDNAME, FDSTOREREMOVE=1 closes every fd of a name), and a record of
// what it was told: each message with its sender's pid (SO_PASSCRED),
// MAINPID=, and the pids that said READY=1. What a start passes from the
// store (LISTEN_FDS) is the caller's to do, from the store's content.
//
// It owns the socket and the stored fds, and closes both in Close. The
// store is kept in the order the fds arrived, as a slice the caller may
// read or rewrite under the manager's lock (With).
package sdnotifytest
