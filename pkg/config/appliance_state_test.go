package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestApplianceDrainRoundTrip: the appliance drain is kept in state_file
// next to the backend overrides, survives a reload of the file, and an
// undrain removes it from the file.
func TestApplianceDrainRoundTrip(t *testing.T) {
	cfg := stateConfig(t)
	path := filepath.Join(t.TempDir(), "state.toml")
	st, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	if !st.DrainAppliance(now) || st.DrainAppliance(now.Add(time.Hour)) {
		t.Fatal("first drain must change, second must not")
	}
	must(t, st.Drain(cfg, "web", b10, now))
	must(t, st.Save(path))
	got, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ApplianceState{Drained: true, DrainedAt: now}); !reflect.DeepEqual(got.Appliance, want) {
		t.Errorf("appliance state %+v, want %+v", got.Appliance, want)
	}
	if len(got.Overrides) != 1 {
		t.Errorf("overrides %+v", got.Overrides)
	}
	if !got.UndrainAppliance() || got.UndrainAppliance() {
		t.Fatal("first undrain must change, second must not")
	}
	must(t, got.Save(path))
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), "[appliance]") {
		t.Errorf("undrained appliance still in the file:\n%s", b)
	}
	again, err := LoadState(path)
	if err != nil || again.Appliance.Drained {
		t.Errorf("after undrain: %+v %v", again.Appliance, err)
	}
}

func TestApplianceStateErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.toml")
	if err := os.WriteFile(path, []byte("version = 1\n[appliance]\ndrained = \"yes\"\ndrianed_at = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadState(path)
	got := issueStrings(t, err)
	want := []string{
		path + ":3: appliance.drained: want a boolean (true or false), got a string",
		path + ":4: appliance.drianed_at: unknown key (did you mean drained_at?)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
