package dataplane

import "github.com/xlbnet/xlb/conntrack"

func conntrackTicks(n int) conntrack.Ticks { return conntrack.Ticks(n) }

func newTable() (*conntrack.Table, error) { return conntrack.New(1<<12, 7) }
