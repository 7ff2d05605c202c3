// Package buildinfo says which build of gnmi-sidecar is running: its
// version, source revision and Go version, as the Go toolchain recorded
// them in the binary (runtime/debug.ReadBuildInfo).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is a build's identity.
type Info struct {
	// Version is the main module's version: a release tag, or the
	// pseudo-version the toolchain derives from the checkout, "(devel)"
	// when it could not.
	Version string
	// Revision is the source control revision ("" if not recorded), Time
	// its commit time, Modified whether the checkout had local changes.
	Revision, Time string
	Modified       bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Read returns the running binary's Info.
func Read() Info {
	info := Info{Version: "(devel)", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if v := bi.Main.Version; v != "" {
		info.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the Info on one line, e.g. "v1.2.0 (commit 1a2b3c4d5e6f, go1.25.3)".
func (i Info) String() string {
	var details []string
	if i.Revision != "" {
		rev := i.Revision[:min(len(i.Revision), 12)]
		if i.Modified {
			rev += ", modified"
		}
		details = append(details, "commit "+rev)
	}
	details = append(details, i.GoVersion)
	return fmt.Sprintf("%s (%s)", i.Version, strings.Join(details, ", "))
}
