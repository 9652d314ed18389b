package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// source_ranges: what is accepted, and each refusal with file:line:key and
// the reason (docs/design.md#source-ranges).
func TestSourceRanges(t *testing.T) {
	v6Rule := strings.Replace(strings.Replace(webRule, `"203.0.113.10"`, `"2001:db8::10"`, 1), `["10.0.1.10", "10.0.1.11"]`, `["2001:db8:1::10"]`, 1)
	for _, tc := range []struct {
		name   string
		rule   string
		want   []string // the prefixes read
		errs   []string
		warns  []string
		absent bool
	}{
		{name: "absent: every source", rule: webRule, absent: true},
		{name: "empty: every source", rule: lines(`source_ranges = []`) + webRule, absent: true},
		{name: "both families on an IPv4 rule", rule: lines(`source_ranges = ["198.51.100.0/24", "2001:db8::/32"]`) + webRule,
			want: []string{"198.51.100.0/24", "2001:db8::/32"}},
		{name: "both families on an IPv6 rule", rule: lines(`source_ranges = ["198.51.100.0/24", "2001:db8::/32"]`) + v6Rule,
			want: []string{"198.51.100.0/24", "2001:db8::/32"}},
		{name: "one element per line", rule: lines(`source_ranges = [`, `  "198.51.100.0/24",`, `  "203.0.113.0/25",`, `]`) + webRule,
			want: []string{"198.51.100.0/24", "203.0.113.0/25"}},
		{name: "host bits", rule: lines(`source_ranges = ["198.51.100.7/24", "2001:db8::1/32"]`) + webRule,
			errs: []string{
				`rules.d/web.toml:1: source_ranges[0]: "198.51.100.7/24" has host bits set: the prefix it lies in is 198.51.100.0/24 (write that, or 198.51.100.7/32 for the one address)`,
				`rules.d/web.toml:1: source_ranges[1]: "2001:db8::1/32" has host bits set: the prefix it lies in is 2001:db8::/32 (write that, or 2001:db8::1/128 for the one address)`,
			}},
		{name: "not prefixes", rule: lines(`source_ranges = ["198.51.100.7", "example.com", 24, "198.51.100.0/33", "fe80::/10%eth0"]`) + webRule,
			errs: []string{
				`rules.d/web.toml:1: source_ranges[0]: "198.51.100.7" is an address, not a prefix: write 198.51.100.7/32 for that one address`,
				`rules.d/web.toml:1: source_ranges[1]: "example.com" is not a prefix like "198.51.100.0/24" or "2001:db8::/32"`,
				`rules.d/web.toml:1: source_ranges[2]: want a prefix like "198.51.100.0/24", got an integer`,
				`rules.d/web.toml:1: source_ranges[3]: "198.51.100.0/33" is not a prefix like "198.51.100.0/24" or "2001:db8::/32"`,
				`rules.d/web.toml:1: source_ranges[4]: "fe80::/10%eth0" is not a prefix like "198.51.100.0/24" or "2001:db8::/32"`,
			}},
		{name: "IPv4-mapped", rule: lines(`source_ranges = ["::ffff:198.51.100.0/120", "::ffff:0:0/95"]`) + webRule,
			errs: []string{
				`rules.d/web.toml:1: source_ranges[0]: "::ffff:198.51.100.0/120" is an IPv4-mapped IPv6 prefix: write the IPv4 prefix 198.51.100.0/24`,
				`rules.d/web.toml:1: source_ranges[1]: "::ffff:0:0/95" is an IPv4-mapped IPv6 prefix shorter than /96: no client has such an address`,
			}},
		{name: "no prefix of the VIP's family", rule: lines(`source_ranges = ["2001:db8::/32"]`) + webRule,
			errs: []string{`rules.d/web.toml:1: source_ranges: no IPv4 prefix: the IPv4 VIP 203.0.113.10 would admit no client (leave source_ranges out, or write [], to admit every source)`}},
		{name: "no IPv6 prefix for an IPv6 VIP", rule: lines(`source_ranges = ["198.51.100.0/24"]`) + v6Rule,
			errs: []string{`rules.d/web.toml:1: source_ranges: no IPv6 prefix: the IPv6 VIP 2001:db8::10 would admit no client (leave source_ranges out, or write [], to admit every source)`}},
		{name: "not a list", rule: lines(`source_ranges = "198.51.100.0/24"`) + webRule,
			errs: []string{`rules.d/web.toml:1: source_ranges: want a list of prefixes like ["198.51.100.0/24", "2001:db8::/32"], got a string`}},
		{name: "listed twice", rule: lines(`source_ranges = [`, `"198.51.100.0/24",`, `"198.51.100.0/24",`, `]`) + webRule,
			want:  []string{"198.51.100.0/24"},
			warns: []string{`rules.d/web.toml:3: source_ranges[1]: 198.51.100.0/24 is listed twice (also source_ranges[0])`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, errs, warns := loadFiles(t, map[string]string{"rules.d/web.toml": tc.rule})
			if !reflect.DeepEqual(errs, tc.errs) {
				t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(errs, "\n"), strings.Join(tc.errs, "\n"))
			}
			var ws []string
			for _, w := range warns {
				if strings.Contains(w, "source_ranges") {
					ws = append(ws, w)
				}
			}
			if !reflect.DeepEqual(ws, tc.warns) {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(ws, "\n"), strings.Join(tc.warns, "\n"))
			}
			if cfg == nil {
				return
			}
			got := cfg.Rules[0].SourceRanges
			if tc.absent {
				if len(got) != 0 {
					t.Errorf("SourceRanges = %v, want none (every source)", got)
				}
				return
			}
			var want []netip.Prefix
			for _, p := range tc.want {
				want = append(want, netip.MustParsePrefix(p))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("SourceRanges = %v, want %v", got, want)
			}
		})
	}
}

func TestSourceRangesLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("source_ranges = [")
	for i := range MaxSourceRanges + 1 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"10.0.0.0/8"`)
	}
	b.WriteString("]\n")
	_, errs, _ := loadFiles(t, map[string]string{"rules.d/web.toml": b.String() + webRule})
	want := []string{"rules.d/web.toml:1: source_ranges: 65537 prefixes, at most 65536"}
	if !reflect.DeepEqual(errs, want) {
		t.Errorf("errors %q, want %q", errs, want)
	}
}

func TestUnmatchedVIPTraffic(t *testing.T) {
	for _, tc := range []struct {
		line string
		want UnmatchedVIPTraffic
		err  string
	}{
		{"", UnmatchedDrop, ""},
		{`unmatched_vip_traffic = "drop"`, UnmatchedDrop, ""},
		{`unmatched_vip_traffic = "pass"`, UnmatchedPass, ""},
		{`unmatched_vip_traffic = "PASS"`, 0, `xlb.toml:3: unmatched_vip_traffic: "PASS" is not allowed (write pass; names are case-sensitive)`},
		{`unmatched_vip_traffic = "reject"`, 0, `xlb.toml:3: unmatched_vip_traffic: "reject" is not one of drop, pass`},
	} {
		cfg, errs, _ := loadFiles(t, map[string]string{"xlb.toml": mainOK + lines(tc.line), "rules.d/web.toml": webRule})
		if tc.err != "" {
			if len(errs) != 1 || errs[0] != tc.err {
				t.Errorf("%s: errors %q, want %q", tc.line, errs, tc.err)
			}
			continue
		}
		if len(errs) != 0 || cfg.UnmatchedVIPTraffic != tc.want {
			t.Errorf("%s: %v (errors %q), want %v", tc.line, cfg.UnmatchedVIPTraffic, errs, tc.want)
		}
	}
}
