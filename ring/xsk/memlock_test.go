package xsk

import "testing"

func TestKernelAtLeast(t *testing.T) {
	for _, tc := range []struct {
		release string
		want    bool
	}{
		{"6.18.44-fc-v1045", true},
		{"5.11.0", true},
		{"5.15.0-91-generic", true},
		{"5.10.0-28-amd64", false},
		{"4.19.0", false},
		{"5.9", false},
		{"10.0.1", true},
		{"6", false},
		{"", false},
		{"x.y.z", false},
	} {
		if got := kernelAtLeast(tc.release, 5, 11); got != tc.want {
			t.Errorf("kernelAtLeast(%q, 5, 11) = %v, want %v", tc.release, got, tc.want)
		}
	}
}
