// Package sdnotify speaks the two halves of systemd's protocol a daemon
// needs to outlive its own process: notifications (sd_notify: READY=1,
// MAINPID=, STOPPING=1, and the file descriptor store: FDSTORE=1 with the
// fds attached, FDSTOREREMOVE=1) and the fds a service manager passes at
// start (LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID: the store's content, or
// sockets). See sd_notify(3), sd_listen_fds(3) and
// systemd.io/FILE_DESCRIPTOR_STORE.
//
// It is a few dozen lines of socket code rather than a dependency
// (github.com/coreos/go-systemd's daemon package does the same, without
// the fd store).
//
// # Decisions
//
//   - Notify without NOTIFY_SOCKET does nothing and reports false: the
//     daemon runs the same with or without a service manager.
//   - Inherited clears LISTEN_* from the environment (as sd_listen_fds
//     with unset_environment), so a child process never takes the fds for
//     its own, and marks the fds close-on-exec.
//   - An abstract socket (NOTIFY_SOCKET starting with @) is supported.
package sdnotify
