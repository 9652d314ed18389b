package config

import (
	"os"
	"reflect"
	"testing"
)

// TestProbePath: a rule's probe path is its own [health_check] path, else
// xlb.toml's health_check_path, else DIRECT (a configuration written before
// data-path probes reads as it did; docs/design.md#data-path-probes).
func TestProbePath(t *testing.T) {
	for _, tc := range []struct {
		name       string
		appliance  string // the health_check_path line of xlb.toml, "" for none
		rule       string // the path line of [health_check], "" for none
		want       ProbePath
		wantSet    bool
		wantErrors []string
	}{
		{name: "neither: as before", want: ProbeDirect},
		{name: "appliance data path", appliance: `health_check_path = "DATA_PATH"`, want: ProbeDataPath, wantSet: true},
		{name: "appliance direct", appliance: `health_check_path = "DIRECT"`, want: ProbeDirect, wantSet: true},
		{name: "rule data path", rule: `path = "DATA_PATH"`, want: ProbeDataPath},
		{name: "rule direct beats appliance", appliance: `health_check_path = "DATA_PATH"`, rule: `path = "DIRECT"`, want: ProbeDirect, wantSet: true},
		{name: "rule data path beats appliance", appliance: `health_check_path = "DIRECT"`, rule: `path = "DATA_PATH"`, want: ProbeDataPath, wantSet: true},
		{name: "wrong case", rule: `path = "data_path"`,
			wantErrors: []string{`rules.d/web.toml:6: health_check.path: "data_path" is not allowed (write DATA_PATH; names are case-sensitive)`}},
		{name: "unknown appliance value", appliance: `health_check_path = "VIP"`,
			wantErrors: []string{`xlb.toml:3: health_check_path: "VIP" is not one of DIRECT, DATA_PATH`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			main := mainOK
			if tc.appliance != "" {
				main += tc.appliance + "\n"
			}
			body := []string{`type = "TCP"`}
			if tc.rule != "" {
				body = append(body, tc.rule)
			}
			cfg, errs, ws := loadFiles(t, map[string]string{"xlb.toml": main, "rules.d/web.toml": healthRule(body...)})
			if !reflect.DeepEqual(errs, tc.wantErrors) {
				t.Fatalf("errors:\n%v\nwant:\n%v", errs, tc.wantErrors)
			}
			if errs != nil {
				return
			}
			if ws != nil {
				t.Errorf("warnings %v", ws)
			}
			if got := cfg.Rules[0].HealthCheck.Path; got != tc.want {
				t.Errorf("path %s, want %s", got, tc.want)
			}
			if cfg.HealthCheckPathSet != tc.wantSet {
				t.Errorf("HealthCheckPathSet %v, want %v", cfg.HealthCheckPathSet, tc.wantSet)
			}
		})
	}
}

// TestProbePathOnNone: a NONE check sends nothing, so a path is refused.
func TestProbePathOnNone(t *testing.T) {
	_, errs, _ := loadFiles(t, map[string]string{"rules.d/web.toml": healthRule(`type = "NONE"`, `path = "DATA_PATH"`)})
	want := []string{"rules.d/web.toml:6: health_check.path: a NONE check sends no probe"}
	if !reflect.DeepEqual(errs, want) {
		t.Errorf("errors:\n%v\nwant:\n%v", errs, want)
	}
}

// TestProbePathFollowsTheApplianceAcrossLoads: a Loader that keeps a rule
// file's parse still gives it the health_check_path xlb.toml says now.
func TestProbePathFollowsTheApplianceAcrossLoads(t *testing.T) {
	path := writeConfig(t, map[string]string{"xlb.toml": mainOK + "health_check_path = \"DATA_PATH\"\n", "rules.d/web.toml": webRule})
	var ld Loader
	cfg, _, err := ld.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Rules[0].HealthCheck.Path; got != ProbeDataPath {
		t.Fatalf("first load: %s", got)
	}
	if err := os.WriteFile(path, []byte(mainOK+"health_check_path = \"DIRECT\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg2, _, err := ld.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg2.Rules[0].SameSource(cfg.Rules[0]) {
		t.Error("the rule file was parsed again: this test no longer tests the kept parse")
	}
	if got := cfg2.Rules[0].HealthCheck.Path; got != ProbeDirect {
		t.Errorf("after xlb.toml changed: %s, want DIRECT", got)
	}
	if got := cfg.Rules[0].HealthCheck.Path; got != ProbeDataPath {
		t.Errorf("the first load's rule changed under it: %s", got)
	}
}
