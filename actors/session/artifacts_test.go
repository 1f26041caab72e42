package session

import (
	"context"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/artifacts"
	"github.com/tah-dev/tah/tools/builtin"
)

// Every blob the log refers to is an artifact of the session: the whole of a
// long tool output, the copy write_file keeps (in the executor's store, as a
// node configures it), and the whole of an answer too large for the log.
func TestEveryArtifactIsRecorded(t *testing.T) {
	b := openBusOf(t, 1<<20)
	root := t.TempDir()
	cat := tools.MustRegistry(append(builtin.Tools(builtin.Config{Root: root, Write: true}), bigTool("big", 200_000))...)
	tc := ToolConfig{Catalog: cat, Options: tools.Options{Logger: quiet, Artifacts: artifacts.New(b.Artifacts())}}
	answer := strings.Repeat("a long answer ", 50_000)
	p := mock.Scripted(
		mock.CallTool("big", `{}`).AndCall("write_file", `{"path": "notes/plan.md", "content": "# Plan\n"}`),
		mock.Say(answer))
	m := startManager(t, b, p, Config{Node: "n1"}, tc)
	Create(context.Background(), b, "s1", Config{}, nil)
	if o := do(t, m, "s1", run("work")); o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}
	st := fold(t, b, "s1")
	byName := map[string]projection.Artifact{}
	for _, a := range st.Artifacts {
		byName[a.Name] = a
	}
	if len(st.Artifacts) != 3 {
		t.Fatalf("artifacts %s", mustJSON(st.Artifacts))
	}
	for name, want := range map[string]string{"output.txt": "text/plain", "notes/plan.md": "" /* the system's MIME table says which */, "response.json": "application/json"} {
		a, ok := byName[name]
		if !ok || !strings.HasPrefix(a.ContentType, want) || a.StepID == "" || a.Seq == 0 || !strings.HasPrefix(a.ID, "art_") {
			t.Fatalf("%s: %+v in %s", name, a, mustJSON(st.Artifacts))
		}
		if st.Step(a.StepID) == nil {
			t.Fatalf("%s names step %s, which is not in the log", name, a.StepID)
		}
	}
	if plan := byName["notes/plan.md"]; plan.CallID == "" || plan.Ref.Size != int64(len("# Plan\n")) {
		t.Fatalf("write_file's copy: %+v", plan)
	}
	got, err := b.GetArtifact(context.Background(), byName["notes/plan.md"].Ref)
	if err != nil || string(got) != "# Plan\n" {
		t.Fatalf("write_file's copy reads %q, %v", got, err)
	}
	if n := len(events[event.ArtifactCreatedData](t, b, "s1", event.ArtifactCreated)); n != 3 {
		t.Fatalf("%d artifact.created", n)
	}
	checkUsable(t, b, "s1")
}

func TestNewArtifactNames(t *testing.T) {
	for _, c := range []struct{ object, dir, name string }{
		{"calls/s1/c1/output.txt", "calls/s1/c1", "output.txt"},
		{"calls/s1/c1/a/b.go", "calls/s1/c1", "a/b.go"},
		{"elsewhere/report.pdf", "calls/s1/c1", "report.pdf"},
	} {
		a := newArtifact(event.ArtifactRef{Object: c.object}, "st", "c1", c.dir)
		if a.Name != c.name {
			t.Errorf("%s: name %q, want %q", c.object, a.Name, c.name)
		}
	}
}
