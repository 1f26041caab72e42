package tools

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tah-dev/tah/event"
)

// ArtifactStore keeps blobs that are too large for an event: the full output of a
// call whose output was cut to a preview, or a file a tool produced. tools/artifacts
// implements it over the NATS object store (bucket "tah_artifacts").
type ArtifactStore interface {
	// Put stores what r yields under name, replacing an object of the same name,
	// and returns where it is.
	Put(ctx context.Context, name string, r io.Reader) (event.ArtifactRef, error)
}

type artifactsKey struct{}

// WithArtifacts returns ctx carrying the executor's store, so that a tool
// that keeps files (write_file) keeps them where the executor keeps long
// outputs, without a store of its own. A nil store leaves ctx as it is.
func WithArtifacts(ctx context.Context, store ArtifactStore) context.Context {
	if store == nil {
		return ctx
	}
	return context.WithValue(ctx, artifactsKey{}, store)
}

// ArtifactsFrom returns the store ctx carries (WithArtifacts), or nil.
func ArtifactsFrom(ctx context.Context) ArtifactStore {
	store, _ := ctx.Value(artifactsKey{}).(ArtifactStore)
	return store
}

// ArtifactName returns the object name under which a call's blob called file is
// stored: "calls/<session>/<call id>/<file>", with "_" for an empty session.
func ArtifactName(info CallInfo, file string) string {
	sess := info.Session
	if sess == "" {
		sess = "_"
	}
	id := info.ID
	if id == "" {
		id = "_"
	}
	return path.Join("calls", sess, id, file)
}

// putTimeout bounds storing a large output once the call is over.
const putTimeout = 30 * time.Second

// offload cuts res.Output to a preview when it is longer than maxOutput
// characters, storing the full output as an artifact when a store is configured.
// The preview ends with a marker that names the full size and where it is.
func (e *Executor) offload(ctx context.Context, info CallInfo, res Result) Result {
	if e.opts.MaxOutput < 0 {
		return res
	}
	if utf8.RuneCountInString(res.Output) <= e.opts.MaxOutput {
		return res
	}
	full := res.Output
	var where string
	switch {
	case res.Artifact != nil:
		where = fmt.Sprintf("the tool stored artifact %s/%s", res.Artifact.Bucket, res.Artifact.Object)
	case e.opts.Artifacts == nil:
		where = "the rest is not kept"
	default:
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), putTimeout)
		ref, err := e.opts.Artifacts.Put(pctx, ArtifactName(info, "output.txt"), strings.NewReader(full))
		cancel()
		if err != nil {
			where = fmt.Sprintf("storing the full output failed: %v", err)
		} else {
			res.Artifact = &ref
			where = fmt.Sprintf("the full output is artifact %s/%s", ref.Bucket, ref.Object)
		}
	}
	res.Output = Truncate("output", full, e.opts.Preview, where)
	return res
}

// Truncate is the cut copy of a text too large to keep whole, what, as the
// model and the log see it: its first preview characters and a note that
// names its full size and says where the whole is (where, e.g. "the full
// output is artifact tah_artifacts/calls/s_1/call_1/output.txt").
func Truncate(what, full string, preview int, where string) string {
	return fmt.Sprintf("%s\n\n[%s truncated: showing the first %d of %d characters (%d bytes); %s]",
		cutRunes(full, preview), what, preview, utf8.RuneCountInString(full), len(full), where)
}

// cutRunes returns the first n runes of s.
func cutRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
