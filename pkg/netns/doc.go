// Package netns creates, enters and deletes named Linux network namespaces
// (the ones `ip netns` manages under /run/netns), for the lab testbed and for
// the end-to-end tests.
//
// Entering a namespace is per OS thread: [NS.Do] locks the calling goroutine
// to its thread, switches the thread into the namespace, runs the function
// and switches back. Sockets created inside Do belong to the namespace for
// their whole life and may be used from any goroutine afterwards; goroutines
// started inside Do do NOT inherit the namespace. If switching back fails the
// thread stays locked, so the runtime discards it when the goroutine ends,
// rather than letting a thread in the wrong namespace serve other goroutines.
//
// Creation and deletion shell out to ip(8) from iproute2, which every Linux
// host running xlb has, so the namespaces are visible to operators with
// `ip netns list` and can be cleaned up by hand after a crash.
package netns
