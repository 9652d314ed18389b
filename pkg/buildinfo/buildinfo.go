// Package buildinfo says which xlb this is: the module version and the
// VCS revision the binary was built from (runtime/debug.ReadBuildInfo),
// for `xlb --version`, `xlb status` and the xlb_build_info metric.
//
// Decisions: the version is what the go command stamps: a release tag, a
// pseudo-version from the git checkout (v0.0.0-<time>-<revision>[+dirty])
// or "(devel)"; the revision, its time and whether the tree had
// uncommitted changes come from the go command's -buildvcs stamps. They
// are missing when VCS stamping is off (-buildvcs=false, as GOFLAGS on
// some build hosts; a tree without git; a git worktree, whose .git is a
// file the go command does not follow) — then the revision is "unknown"
// rather than guessed. Release builds: go build -buildvcs=true in a clone.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is what the binary knows about its build.
type Info struct {
	Module    string `json:"module"`
	Version   string `json:"version"`  // module version, "(devel)" from a work tree
	Revision  string `json:"revision"` // VCS revision, "unknown" without VCS stamps
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified"` // built from a tree with uncommitted changes
	GoVersion string `json:"go_version"`
}

// Read returns the running binary's build information.
func Read() Info {
	in := Info{Module: "github.com/xlbnet/xlb", Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	if bi.Main.Path != "" {
		in.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		in.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is one line: "xlb (devel) revision 0123abcd… (modified) go1.26.0".
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "xlb %s revision %s", in.Version, in.Revision)
	if in.Time != "" {
		fmt.Fprintf(&b, " of %s", in.Time)
	}
	if in.Modified {
		b.WriteString(" (modified)")
	}
	fmt.Fprintf(&b, ", %s, module %s", in.GoVersion, in.Module)
	return b.String()
}

// Short is version and revision: "(devel) 0123abcd".
func (in Info) Short() string {
	rev := in.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if in.Modified {
		rev += "+modified"
	}
	return in.Version + " " + rev
}
