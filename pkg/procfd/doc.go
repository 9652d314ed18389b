// Package procfd finds the processes that hold a file, from their
// descriptors in /proc (/proc/PID/fd links, /proc/PID/fdinfo), as
// fuser(1) and bpftool's pids column do. It decides nothing about what a
// holder means: its callers name the holder of a control socket
// (pkg/control) and of an interface's XDP program (pkg/daemon) in their
// error messages. A process whose descriptors cannot be read (gone, or
// another user's without root) is passed over.
package procfd
