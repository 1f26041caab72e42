package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"reflect"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
)

// toResult maps an MCP result onto a TAH result: text as it is, structured
// content as JSON (unless a text block already holds it), binary content
// stored as artifacts through the executor's store and described in text,
// isError as a failed result.
func toResult(ctx context.Context, res *sdk.CallToolResult) tools.Result {
	var parts []string
	var first *event.ArtifactRef
	for i, c := range res.Content {
		text, ref := describe(ctx, i, c)
		parts = append(parts, text)
		if first == nil {
			first = ref
		}
	}
	if s := structured(res.StructuredContent, parts); s != "" {
		parts = append(parts, s)
	}
	out := strings.Join(parts, "\n")
	var r tools.Result
	if res.IsError {
		if out == "" {
			out = "the tool reported an error without a message"
		}
		r = tools.Failed(event.CodeToolError, out)
	} else {
		r = tools.Text(out)
	}
	r.Artifact = first
	return r
}

// structured returns the structured content as JSON, or "" when there is none
// or a text block already says the same.
func structured(v any, texts []string) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("[structured content that cannot be written as JSON: %v]", err)
	}
	var want any
	_ = json.Unmarshal(b, &want)
	for _, t := range texts {
		var got any
		if json.Unmarshal([]byte(t), &got) == nil && reflect.DeepEqual(got, want) {
			return ""
		}
	}
	if restates(want, texts) {
		return ""
	}
	return string(b)
}

// restates reports whether structured content only wraps the text blocks:
// an object each of whose values is a string that the text says whole (the
// filesystem server answers {"content": <its text>} beside the text). The
// model would read everything twice.
func restates(v any, texts []string) bool {
	obj, ok := v.(map[string]any)
	if !ok || len(obj) == 0 {
		return false
	}
	all := strings.Join(texts, "\n")
	for _, val := range obj {
		s, ok := val.(string)
		if !ok || (!slices.Contains(texts, s) && s != all) {
			return false
		}
	}
	return true
}

// describe returns what the model sees of one content block, and the
// artifact it was stored as, if any.
func describe(ctx context.Context, i int, c sdk.Content) (string, *event.ArtifactRef) {
	switch c := c.(type) {
	case *sdk.TextContent:
		return c.Text, nil
	case *sdk.ImageContent:
		return keep(ctx, i, "image", c.MIMEType, c.Data)
	case *sdk.AudioContent:
		return keep(ctx, i, "audio", c.MIMEType, c.Data)
	case *sdk.ResourceLink:
		return fmt.Sprintf("[resource link %s: %s%s]", c.Name, c.URI, mimeNote(c.MIMEType)), nil
	case *sdk.EmbeddedResource:
		if c.Resource == nil {
			return "[an empty embedded resource]", nil
		}
		if c.Resource.Blob != nil {
			text, ref := keep(ctx, i, "resource "+c.Resource.URI, c.Resource.MIMEType, c.Resource.Blob)
			return text, ref
		}
		return fmt.Sprintf("[resource %s%s]\n%s", c.Resource.URI, mimeNote(c.Resource.MIMEType), c.Resource.Text), nil
	default:
		b, _ := json.Marshal(c)
		return fmt.Sprintf("[content of an unknown kind: %s]", b), nil
	}
}

func mimeNote(m string) string {
	if m == "" {
		return ""
	}
	return " (" + m + ")"
}

// keep stores binary content as the artifact calls/<session>/<call>/content-<i>.<ext>
// and describes it to the model.
func keep(ctx context.Context, i int, what, mimeType string, data []byte) (string, *event.ArtifactRef) {
	head := fmt.Sprintf("[%s%s, %d bytes", what, mimeNote(mimeType), len(data))
	store := tools.ArtifactsFrom(ctx)
	if store == nil {
		return head + ", not kept: this tool service has no artifact store]", nil
	}
	info, _ := tools.CallFrom(ctx)
	ref, err := store.Put(ctx, tools.ArtifactName(info, fmt.Sprintf("content-%d%s", i, extension(mimeType))), bytes.NewReader(data))
	if err != nil {
		return fmt.Sprintf("%s, not kept: storing it failed: %v]", head, err), nil
	}
	return fmt.Sprintf("%s, stored as artifact %s/%s]", head, ref.Bucket, ref.Object), &ref
}

// extension is a file extension for mimeType, or ".bin".
func extension(mimeType string) string {
	if exts, _ := mime.ExtensionsByType(mimeType); len(exts) > 0 {
		return exts[0]
	}
	return ".bin"
}
