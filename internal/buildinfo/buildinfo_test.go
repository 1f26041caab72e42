package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.27.3", Main: debug.Module{Path: "github.com/tah-dev/tah", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "9e39c49a1b2c3d4e5f60718293a4b5c6d7e8f901"},
			{Key: "vcs.time", Value: "2026-12-01T22:14:03Z"},
			{Key: "vcs.modified", Value: "true"},
		}}
	if got, want := fromBuildInfo(bi).String(), "v0.3.0 (rev 9e39c49a1b2c, 2026-12-01T22:14:03Z, modified) go1.27.3"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	bare := &debug.BuildInfo{GoVersion: "go1.27.3"}
	if got, want := fromBuildInfo(bare).String(), "(devel) go1.27.3"; got != want {
		t.Errorf("without a version or VCS stamp: got %q, want %q", got, want)
	}
}

// A test binary has build information too: Describe names the program and
// the toolchain.
func TestDescribe(t *testing.T) {
	got := Describe("tahctl")
	if !strings.HasPrefix(got, "tahctl ") || !strings.Contains(got, "go1.") {
		t.Errorf("Describe = %q", got)
	}
}
