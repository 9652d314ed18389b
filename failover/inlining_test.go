package failover

import (
	"testing"

	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestInlining: the validity rule the dataplane's workers run on every
// tracked hit stays inlinable.
func TestInlining(t *testing.T) {
	testutil.MustInline(t, "Gens.Valid", "Gens.Stamp", "Gens.Current")
}
