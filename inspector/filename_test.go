package inspector

import (
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
)

// A download's file name is the artifact's base name, never a path, a
// header's quote or a control character; its type is a valid media type.
func TestDownloadNameAndType(t *testing.T) {
	for name, want := range map[string]string{
		"output.txt":        "output.txt",
		"out/report.md":     "report.md",
		"../../etc/passwd":  "passwd",
		`..\..\boot.ini`:    "boot.ini",
		"a\"b\r\nX-Evil: 1": "a_b__X-Evil: 1",
		"":                  "art_1",
		"..":                "art_1",
		"dir/":              "dir",
		"报告.txt":            "报告.txt",
		"\x00\x01":          "art_1",
	} {
		art := projection.Artifact{ArtifactCreatedData: event.ArtifactCreatedData{ID: "art_1", Name: name}}
		if got := fileName(art); got != want {
			t.Errorf("fileName(%q) = %q, want %q", name, got, want)
		}
	}
	for recorded, want := range map[string]string{
		"text/plain; charset=utf-8": "text/plain; charset=utf-8",
		"":                          "application/octet-stream",
		"not a type;;":              "application/octet-stream",
	} {
		if got := contentType(recorded); got != want {
			t.Errorf("contentType(%q) = %q, want %q", recorded, got, want)
		}
	}
}
