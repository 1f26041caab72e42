package session

import (
	"mime"
	"path"
	"strings"

	"github.com/tah-dev/tah/event"
)

// artifactsOf is the artifact.created of each artifact an event refers to:
// the whole of a large answer (llm.completed) or of a large tool output, or
// a file a tool stored (tool.finished). They follow the event in the same
// record, so that the session's artifacts list holds every blob its log
// refers to.
func (a *AgentContext) artifactsOf(payload any) []event.ArtifactCreatedData {
	switch d := payload.(type) {
	case event.LLMCompletedData:
		if d.Artifact != nil {
			return []event.ArtifactCreatedData{newArtifact(*d.Artifact, d.StepID, "", path.Join("steps", a.Session, d.StepID))}
		}
	case event.ToolFinishedData:
		if d.Artifact != nil {
			return []event.ArtifactCreatedData{newArtifact(*d.Artifact, d.StepID, d.CallID, path.Join("calls", a.Session, d.CallID))}
		}
	}
	return nil
}

// newArtifact describes the blob ref as a step's artifact: its name is the
// object's name below dir, the step's own folder in the store (the path a
// tool wrote, "output.txt", "response.json"), or the object's base name when
// a tool stored it elsewhere.
func newArtifact(ref event.ArtifactRef, stepID, callID, dir string) event.ArtifactCreatedData {
	name, ok := strings.CutPrefix(ref.Object, dir+"/")
	if !ok || name == "" {
		name = path.Base(ref.Object)
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	return event.ArtifactCreatedData{ID: event.NewID("art_"), Name: name, StepID: stepID, CallID: callID, ContentType: ctype, Ref: ref}
}
