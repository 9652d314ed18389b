// Package testutil holds helpers shared by tests that need the real kernel:
// root checks that skip loudly, per-test unique names (go test runs packages
// in parallel, so every namespace and link name carries a unique suffix),
// and namespaces that are torn down even when the test fails; and small
// readers of what tests receive (SeekJSONArray: a streamed JSON answer).
package testutil
