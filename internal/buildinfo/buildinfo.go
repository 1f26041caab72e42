package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Info is what the build recorded about itself.
type Info struct {
	// Version is the main module's version: a tag such as v0.3.0 for
	// `go install module@version`, "(devel)" for a build in a clone.
	Version string
	// Revision, Time and Modified are the VCS stamp (-buildvcs): the commit,
	// its time, and whether the tree had uncommitted changes. Empty when the
	// build had no VCS information (a module download, -buildvcs=false).
	Revision, Time string
	Modified       bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Read is the running binary's build information; a binary built without
// module support (never for TAH's) reports "unknown".
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown"}
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if info.Version == "" {
		info.Version = "(devel)"
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

// String is one line: "v0.3.0 (rev 9e39c49a1b2c, 2026-12-01T22:14:03Z,
// modified) go1.27.3".
func (i Info) String() string {
	var stamp []string
	if i.Revision != "" {
		stamp = append(stamp, "rev "+shortRevision(i.Revision))
	}
	if i.Time != "" {
		stamp = append(stamp, i.Time)
	}
	if i.Modified {
		stamp = append(stamp, "modified")
	}
	s := i.Version
	if len(stamp) > 0 {
		s += " (" + strings.Join(stamp, ", ") + ")"
	}
	if i.GoVersion != "" {
		s += " " + i.GoVersion
	}
	return s
}

// Describe is the --version line of the program named name.
func Describe(name string) string { return name + " " + Read().String() }

// shortRevision keeps the first 12 hex digits of a commit, as git's short
// form would with room to spare.
func shortRevision(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
