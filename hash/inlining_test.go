package hash

import (
	"testing"

	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestInlining: the per-packet helpers stay inlinable.
func TestInlining(t *testing.T) {
	testutil.MustInline(t,
		"(*MaglevTable).Lookup", "hasPorts", "SelectionKind", "TrackingKind",
		"(*Key).set", "tailWord", "xxhRound", "xxhMergeRound", "xxhAvalanche",
	)
}
