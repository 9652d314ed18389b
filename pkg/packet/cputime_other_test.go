//go:build !linux

package packet_test

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }
