package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/BurntSushi/toml"
)

// stateFile is the on-disk form.
type stateFile struct {
	Version   int            `toml:"version"`
	Appliance *applianceFile `toml:"appliance,omitempty"`
	Override  []overrideFile `toml:"override"`
}

type overrideFile struct {
	Rule      string     `toml:"rule"`
	Backend   string     `toml:"backend"`
	Role      string     `toml:"role,omitempty"`
	Drained   bool       `toml:"drained,omitempty"`
	DrainedAt *time.Time `toml:"drained_at,omitempty"`
	Weight    *uint16    `toml:"weight,omitempty"`
}

const stateHeader = `# xlb state overlay: changes made with xlb backend mark|drain|undrain|weight
# and xlb appliance drain|undrain.
# Written by the xlb daemon (atomically) and applied on top of the rule
# files, which xlb never rewrites. Do not edit while xlb runs;
# "xlb backend reset --rule R ADDR" removes an override.
`

// Marshal returns the state file's text.
func (st *State) Marshal() ([]byte, error) {
	sf := stateFile{Version: stateVersion, Appliance: st.Appliance.file()}
	for _, o := range st.Overrides {
		of := overrideFile{Rule: o.Rule, Backend: o.Backend.String(), Drained: o.Drained}
		if o.RoleSet {
			of.Role = o.Role.String()
		}
		if o.Drained && !o.DrainedAt.IsZero() {
			t := o.DrainedAt.UTC()
			of.DrainedAt = &t
		}
		if o.WeightSet {
			w := o.Weight
			of.Weight = &w
		}
		sf.Override = append(sf.Override, of)
	}
	var b bytes.Buffer
	b.WriteString(stateHeader)
	if err := toml.NewEncoder(&b).Encode(sf); err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	return b.Bytes(), nil
}

// Save writes the state to path atomically: a temporary file in the same
// directory, fsync, rename over path, fsync of the directory. A reader (or
// a restart after a crash) sees the old file or the new one, never a mix.
// The directory is created when missing.
func (st *State) Save(path string) error {
	data, err := st.Marshal()
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, data, 0o644); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// saveHook lets tests fail a save at a given stage ("write", "sync",
// "rename") to simulate a crash or a full disk.
var saveHook func(stage string) error

func hook(stage string) error {
	if saveHook != nil {
		return saveHook(stage)
	}
	return nil
}

func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Temporary files of a save that crashed before its rename.
	if old, _ := filepath.Glob(filepath.Join(dir, "."+base+".tmp-*")); len(old) > 0 {
		for _, p := range old {
			os.Remove(p)
		}
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = hook("write"); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = hook("sync"); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = hook("rename"); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	// The rename is durable only once the directory entry is.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
