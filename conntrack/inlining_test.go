package conntrack

import (
	"testing"

	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestInlining: the per-packet helpers stay inlinable.
func TestInlining(t *testing.T) {
	testutil.MustInline(t,
		"Time.Before", "Time.Add", "Now", "TimeOf",
		"keyEqual", "mix",
		"(*bucket).find", "(*bucket).clear", "(*bucket).empties", "(*bucket).firstTag",
		"(*Entry).Value", "(*Entry).set", "(*Table).Reselect",
	)
}
