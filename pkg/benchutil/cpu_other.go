//go:build !linux

package benchutil

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
func threadCPU() (time.Duration, bool)  { return 0, false }
