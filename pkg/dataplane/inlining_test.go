package dataplane

import (
	"testing"

	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestInlining: the per-packet helpers stay inlinable.
func TestInlining(t *testing.T) {
	testutil.MustInline(t,
		"(*Matcher).IsVIP", "(*Matcher).vip", "(*Matcher).home", "(*portMatcher).match",
		"(*Rule).zoneTable", "(*ProtoSet).Has", "(*Backend).Stamp", "(*Backend).gens", "isEchoRequest", "drop",
		"(*BackendStats).Flush", "(*Snapshot).decideFlow",
	)
}
