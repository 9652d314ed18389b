package encap_test

import (
	"time"

	"github.com/xlbnet/xlb/pkg/benchutil"
)

// cpuTime returns the process's CPU time, or 0 where it is unknown.
func cpuTime() time.Duration {
	d, _ := benchutil.ProcessCPU()
	return d
}
