package packet

import (
	"testing"

	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestInlining: the per-packet helpers stay inlinable.
func TestInlining(t *testing.T) {
	testutil.MustInline(t,
		"Parse", "be16", "mapIPv4", "ipv4HeaderSum20OK", "IsValidTCPFlags", "innerPorts",
		"isICMPv4Error", "isICMPv6Error", "Result.Class",
	)
}
