package main

import (
	"strings"
	"testing"
)

// TestPktgenUsageErrors: every mistake in calling `xlb pktgen` is a usage
// error (exit 2) with a message naming the flag, before anything is
// opened. "lo" exists in every namespace, so only the flag under test is
// wrong.
func TestPktgenUsageErrors(t *testing.T) {
	ok := []string{"pktgen", "-i", "lo", "-m", "02:00:00:00:00:02"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pktgen"}, "--dev (-i) is required"},
		{[]string{"pktgen", "-i", "nosuchdev0", "-m", "02:00:00:00:00:02"}, `interface "nosuchdev0"`},
		{[]string{"pktgen", "-i", "lo"}, "--dst-mac (-m)"},
		{append(ok, "--proto", "icmp"), "--proto"},
		{append(ok, "-d", "198.18.0.300"), "--dst"},
		{append(ok, "--src", "fd00::1"), "different families"},
		{append(ok, "-p", "444-433"), "--dst-port"},
		{append(ok, "--src-port", "0"), "--src-port"},
		{append(ok, "-s", "5000"), "packet size 5000"},
		{append(ok, "-s", "0"), "--size 0"},
		{append(ok, "-t", "0"), "--threads 0"},
		{append(ok, "-b", "0"), "--batch 0"},
		{append(ok, "--bind", "fast"), "bind mode"},
		{append(ok, "--src-mac", "zz"), "--src-mac"},
		{append(ok, "extra"), "takes no arguments"},
		{append(ok, "--bogus"), "bogus"},
	} {
		_, _, err := runXLB(t, tc.args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v (exit %d); want a usage error mentioning %q", tc.args, err, exitCode(err), tc.want)
		}
	}
}
