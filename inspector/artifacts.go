package inspector

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/projection"
)

// artifact streams one of a session's artifacts to the browser as a
// download, a piece at a time through client.FetchArtifact (never whole in
// memory). Its record (tah.api.artifacts) comes first, so that the headers
// (type, file name) precede the content. The body is chunked, with no
// Content-Length: a failure once the content started (the node gone, or a
// SHA-256 that does not match, known only after the last byte) aborts the
// response before its last chunk, and the browser sees a failed download,
// never a damaged file taken for whole.
func (h *Handler) artifact(w http.ResponseWriter, r *http.Request) {
	sid, id := r.PathValue("sid"), r.PathValue("art")
	ctx := r.Context() // each piece is bounded by the client's request timeout
	list, err := h.c.Artifacts(ctx, sid)
	if err != nil {
		h.failPage(w, r, err)
		return
	}
	art, ok := findArtifact(list.Artifacts, id)
	if !ok {
		h.failPage(w, r, fmt.Errorf("session %s has no artifact %s: its page lists those it has: %w", sid, id, client.ErrNotFound))
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", contentType(art.ContentType))
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": fileName(art)}))
	hd.Set("Cache-Control", "private, no-store")
	if r.Method == http.MethodHead { // the GET pattern takes HEAD too: headers only, nothing read
		return
	}
	sw := &startWriter{w: w}
	if _, err := h.c.FetchArtifact(ctx, sid, art.ID, sw); err != nil {
		if !sw.started {
			hd.Del("Content-Disposition")
			h.failPage(w, r, err)
			return
		}
		h.log.Error("inspector: artifact download cut", "session", sid, "artifact", art.ID, "err", err)
		panic(http.ErrAbortHandler) // ends the response without its last chunk
	}
}

// findArtifact is the artifact of id among arts.
func findArtifact(arts []projection.Artifact, id string) (projection.Artifact, bool) {
	for _, a := range arts {
		if a.ID == id {
			return a, true
		}
	}
	return projection.Artifact{}, false
}

// contentType is the artifact's recorded type when it is a valid media
// type, application/octet-stream otherwise. It is always a download
// (Content-Disposition: attachment, nosniff), so an HTML artifact is never
// shown as one of the inspector's pages.
func contentType(recorded string) string {
	if _, _, err := mime.ParseMediaType(recorded); err != nil || recorded == "" {
		return "application/octet-stream"
	}
	return recorded
}

// fileName is a safe name to save the artifact as: the last element of its
// name, without control characters or separators, or its id when nothing
// is left.
func fileName(art projection.Artifact) string {
	name := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' || r == '"' {
			return '_'
		}
		return r
	}, path.Base(strings.ReplaceAll(art.Name, "\\", "/")))
	if name == "." || name == ".." || name == "/" || strings.Trim(name, "_.") == "" {
		return art.ID
	}
	return name
}

// startWriter records whether the response started: after the first
// Write its headers are gone, and an error can no longer be a page.
type startWriter struct {
	w       io.Writer
	started bool
}

func (s *startWriter) Write(p []byte) (int, error) {
	s.started = true
	return s.w.Write(p)
}
