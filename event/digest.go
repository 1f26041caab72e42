package event

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/tah-dev/tah/llm"
)

// RequestSHA256 is the hex SHA-256 of req's canonical JSON: the bytes
// encoding/json's Marshal writes for it (no insignificant whitespace, the
// fields in the order of the llm.Request schema, empty optional fields left
// out, raw JSON values such as tool arguments and input schemas compacted,
// and <, >, & escaped as \u003c, \u003e, \u0026). llm.started records it so
// that a request rebuilt from the log can be checked byte for byte.
func RequestSHA256(req llm.Request) (string, error) {
	return canonicalSHA256("request", req)
}

// ToolsDigest is the hex SHA-256 of the canonical JSON (as RequestSHA256) of
// a list of tool schemas: the "tools" member of a request that offers them.
// It names the list in tools.offered and llm.started; "" for no tools.
func ToolsDigest(tools []llm.ToolSchema) (string, error) {
	if len(tools) == 0 {
		return "", nil
	}
	return canonicalSHA256("tools", tools)
}

func canonicalSHA256(what string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%s not hashed: %w: %v", what, ErrMalformed, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
