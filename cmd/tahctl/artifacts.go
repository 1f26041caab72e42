package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/wire"
)

const artifactsHelp = `Lists a session's artifacts: the files its tools produced (write_file keeps a
copy of each file it writes), and the whole of every tool output or answer too
large for the log. For each its id, name, size, type and the step that made it.
` + "`tahctl artifact get ID ARTIFACT`" + ` fetches one.`

// runArtifacts is `tahctl artifacts ID`.
func runArtifacts(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("artifacts", "ID", artifactsHelp)
	id, c, err := g.sessionCommand(ctx, fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.Artifacts(ctx, id)
	if err != nil {
		return c.failed(wire.EndpointArtifacts, err)
	}
	if g.json {
		return printJSON(g.stdout, r)
	}
	if len(r.Artifacts) == 0 {
		fmt.Fprintf(g.stdout, "session %s has no artifacts\n", id)
		return nil
	}
	st := newStyle(g, g.stdout)
	var t table
	t.add(cell{"ID", st.bold}, cell{"NAME", st.bold}, cell{"BYTES", st.bold}, cell{"TYPE", st.bold}, cell{"STEP", st.bold})
	for _, a := range r.Artifacts {
		t.add(plain(a.ID), plain(a.Name), plain(num(int(a.Ref.Size))), plain(a.ContentType), plain(a.StepID))
	}
	return t.write(g.stdout)
}

const artifactGetHelp = `Fetches an artifact's content (ARTIFACT is its id or its name, as
` + "`tahctl artifacts ID`" + ` lists them) and checks it against its recorded size and
SHA-256. It goes to stdout, or with -o to FILE (written whole or not at all).
With --json, prints the artifact's record instead of its content.`

// runArtifact is `tahctl artifact get ID ARTIFACT [-o FILE]`.
func runArtifact(ctx context.Context, g *globals, args []string) error {
	if len(args) == 0 || args[0] != "get" {
		return usageError("`tahctl artifact get ID ARTIFACT [-o FILE]`; `tahctl artifacts ID` lists them", "artifact: the subcommand is get")
	}
	fs := g.flags("artifact get", "ID ARTIFACT [-o FILE]", artifactGetHelp)
	out := fs.String("o", "", "write the content to `FILE` instead of stdout")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError("`tahctl artifact get ID ARTIFACT [-o FILE]`; `tahctl artifacts ID` lists them", "artifact get takes a session id and an artifact, got %d arguments", len(pos))
	}
	id, key := pos[0], pos[1]
	if err := checkID(id); err != nil {
		return err
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	switch {
	case g.json:
		art, err := c.FetchArtifact(ctx, id, key, io.Discard)
		if err != nil {
			return c.artifactFailed(id, err)
		}
		return printJSON(g.stdout, art)
	case *out == "":
		_, err := c.FetchArtifact(ctx, id, key, g.stdout)
		return c.artifactFailed(id, err)
	}
	return c.fetchToFile(ctx, id, key, *out)
}

// fetchToFile fetches an artifact into path through a temporary file beside
// it, renamed once the content is checked: path never holds part of it.
func (c *conn) fetchToFile(ctx context.Context, id, key, path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return errorf(exitFailed, "choose a writable place with -o", "%v", err)
	}
	defer os.Remove(tmp.Name())
	_, err = c.FetchArtifact(ctx, id, key, tmp)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		return errorf(exitFailed, "check the disk", "write %s: %v", path, cerr)
	}
	if err != nil {
		return c.artifactFailed(id, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return errorf(exitFailed, "choose a writable place with -o", "%v", err)
	}
	return nil
}

// artifactFailed is the error of fetching an artifact of session id.
func (c *conn) artifactFailed(id string, err error) error {
	if errors.Is(err, client.ErrArtifactCorrupt) {
		return errorf(exitFailed, "fetch it again; if it fails the same way, the blob in tah_artifacts is damaged", "%v", err)
	}
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Code == wire.APIErrNotFound {
		return errorf(exitNotFound, "`tahctl artifacts "+id+"` lists the session's artifacts", "%s", ae.Message)
	}
	return c.failed(wire.EndpointArtifact, err)
}
