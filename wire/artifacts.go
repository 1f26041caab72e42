package wire

import "github.com/tah-dev/tah/projection"

// ArtifactChunkMax is the content a tah.api.artifact reply holds when the
// request sets no limit: 512 KiB, some 700 KB as base64, so that a reply
// fits the 1 MiB a NATS server takes by default.
const ArtifactChunkMax = 512 << 10

// ArtifactPieceMax is the most content one tah.api.artifact reply holds on
// a server whose max payload is maxPayload bytes: what fits as base64 with
// room for the rest of the reply, and never less than ArtifactChunkMax. A
// large artifact is read in fewer pieces where the server takes more (the
// embedded server's 8 MiB: some 6 MiB a piece).
func ArtifactPieceMax(maxPayload int64) int {
	return max(ArtifactChunkMax, int((maxPayload-8192)/4*3))
}

// ArtifactsReply is the reply of tah.api.artifacts (whose request is a
// SessionRequest): every artifact of the session, in the order they were
// created. Each names the step (and tool call) that produced it and its
// blob in the object store tah_artifacts, with its size and SHA-256.
type ArtifactsReply struct {
	Session   string                `json:"session"`
	Artifacts []projection.Artifact `json:"artifacts"`
}

// ArtifactRequest asks tah.api.artifact for a piece of an artifact's
// content: Limit bytes from Offset. A client reads the whole by asking from
// offset 0 until a reply says EOF, and checks it against the artifact's
// size and SHA-256.
type ArtifactRequest struct {
	Session string `json:"session"`
	// Artifact is the artifact's id, or its name (the latest artifact of
	// that name).
	Artifact string `json:"artifact"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"minimum=0"`
	// Limit is the most bytes wanted: ArtifactChunkMax when 0, and at most
	// ArtifactPieceMax of the node's server.
	Limit int `json:"limit,omitempty" jsonschema:"minimum=0"`
}

// ArtifactReply is a piece of an artifact's content.
type ArtifactReply struct {
	Session  string              `json:"session"`
	Artifact projection.Artifact `json:"artifact"`
	Offset   int64               `json:"offset"`
	// Data is the content from Offset (base64 in JSON).
	Data []byte `json:"data"`
	// EOF is true when Data ends the content.
	EOF bool `json:"eof"`
}
