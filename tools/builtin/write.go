package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
)

// WriteFileTool is write_file: it writes a text file under Root, creating the
// directories it needs, and stores a copy of what it wrote as an artifact in
// Artifacts, or else in the store of the executor that runs it (a node's is
// tah_artifacts). It is off unless configured (see Config.Write). It is exclusive (a batch
// runs it alone, in call order) and idempotent (writing the same content twice
// leaves the same file).
type WriteFileTool struct {
	Root   string
	Limits Limits
	// Artifacts, when set, receives a copy of every file written, named
	// tools.ArtifactName(call, path); the result's Artifact refers to it.
	// When nil, the executor's store (tools.ArtifactsFrom) does, if any.
	Artifacts tools.ArtifactStore
	// Protect names what it refuses inside Root besides SecretPatterns.
	Protect Protect
}

var (
	_ tools.IdempotentTool = (*WriteFileTool)(nil)
	_ tools.ExclusiveTool  = (*WriteFileTool)(nil)
)

// WriteFile returns write_file confined to root, storing artifacts in store
// (which may be nil), with the default limits.
func WriteFile(root string, store tools.ArtifactStore) *WriteFileTool {
	return &WriteFileTool{Root: root, Artifacts: store}
}

func (t *WriteFileTool) Name() string     { return "write_file" }
func (t *WriteFileTool) Idempotent() bool { return true }
func (t *WriteFileTool) Exclusive() bool  { return true }
func (t *WriteFileTool) Description() string {
	return "Write a text file of the project, replacing it if it exists and creating missing directories. " +
		"Paths are relative to the project root."
}

func (t *WriteFileTool) Schema() json.RawMessage {
	l := t.Limits.withDefaults()
	return memo(describedKey{"write_file", "schema", l}, func() json.RawMessage {
		return mustJSON(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path": map[string]any{
					"type":        "string",
					"description": "File to write, relative to the project root.",
				},
				"content": map[string]any{
					"type":        "string",
					"maxLength":   l.MaxWriteBytes,
					"description": fmt.Sprintf("The whole new content of the file, at most %d bytes.", l.MaxWriteBytes),
				},
			},
			"required":             []string{"path", "content"},
			"additionalProperties": false,
		})
	})
}

func (t *WriteFileTool) Run(ctx context.Context, raw json.RawMessage) (tools.Result, error) {
	var in struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return tools.Result{}, tools.Errorf(event.CodeInvalidInput, "bad input: %v", err)
	}
	lim := t.Limits.withDefaults()
	if len(in.Content) > lim.MaxWriteBytes {
		return tools.Result{}, tools.Errorf(event.CodeInvalidInput, "content is %d bytes, at most %d allowed", len(in.Content), lim.MaxWriteBytes)
	}
	sb := sandbox{root: t.Root, protect: t.Protect}
	rel, err := sb.clean(in.Path)
	if err != nil {
		return tools.Result{}, err
	}
	if rel == "." {
		return tools.Result{}, tools.Errorf(event.CodeInvalidInput, "path %q names the root directory, not a file", in.Path)
	}
	root, err := sb.open()
	if err != nil {
		return tools.Result{}, err
	}
	defer root.Close()
	if err := sb.guard(root).check(rel, "writable"); err != nil {
		return tools.Result{}, err
	}
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return tools.Result{}, describe(dir, err)
		}
	}
	if fi, err := root.Stat(rel); err == nil && !fi.Mode().IsRegular() {
		return tools.Result{}, tools.Errorf(event.CodeInvalidInput, "path %q: %w (it is a %s)", rel, ErrNotRegular, kind(fi.Mode()))
	}
	if err := ctx.Err(); err != nil {
		return tools.Result{}, err
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|openNonblock, 0o644)
	if err != nil {
		return tools.Result{}, describe(rel, err)
	}
	_, werr := f.Write([]byte(in.Content))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return tools.Result{}, describe(rel, werr)
	}
	out := fmt.Sprintf("Wrote %d bytes to %s.", len(in.Content), rel)
	store := t.Artifacts
	if store == nil {
		store = tools.ArtifactsFrom(ctx)
	}
	if store == nil {
		return tools.Text(out), nil
	}
	info, _ := tools.CallFrom(ctx)
	ref, err := store.Put(ctx, tools.ArtifactName(info, rel), bytes.NewReader([]byte(in.Content)))
	if err != nil {
		return tools.Text(out + fmt.Sprintf(" Storing a copy as an artifact failed: %v", err)), nil
	}
	res := tools.Text(out + fmt.Sprintf(" A copy is artifact %s/%s.", ref.Bucket, ref.Object))
	res.Artifact = &ref
	return res, nil
}
