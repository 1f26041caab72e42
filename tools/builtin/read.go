package builtin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
)

// ReadFileTool is read_file: it reads a text file under Root.
//
// Input: {"path": "...", "offset": 0, "limit": n, "unit": "lines"|"bytes"}. It
// returns the text from the offset on (lines to skip, or a byte offset), at most
// limit lines or bytes and never more than Limits.MaxBytes; a cut text ends with a
// line in square brackets that says where to continue. A binary file (a NUL byte or
// invalid UTF-8 in its first 8 KiB) is described, with its size and a guess of its
// type, instead of shown.
type ReadFileTool struct {
	Root   string
	Limits Limits
	// Protect names what it refuses inside Root besides SecretPatterns.
	Protect Protect
}

var _ tools.IdempotentTool = (*ReadFileTool)(nil)

// ReadFile returns read_file confined to root, with the default limits.
func ReadFile(root string) *ReadFileTool { return &ReadFileTool{Root: root} }

func (t *ReadFileTool) Name() string     { return "read_file" }
func (t *ReadFileTool) Idempotent() bool { return true }
func (t *ReadFileTool) Description() string {
	l := t.Limits.withDefaults()
	return memo(describedKey{"read_file", "description", l}, func() string {
		return fmt.Sprintf("Read a text file of the project. Paths are relative to the project root. "+
			"Returns at most %d lines and %d bytes at a time; a longer file ends with a note that says which offset to continue from. "+
			"Binary files are described, not shown.", l.MaxLines, l.MaxBytes)
	})
}

func (t *ReadFileTool) Schema() json.RawMessage {
	l := t.Limits.withDefaults()
	return memo(describedKey{"read_file", "schema", l}, func() json.RawMessage {
		return mustJSON(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path": map[string]any{
					"type":        "string",
					"description": "File to read, relative to the project root.",
				},
				"offset": map[string]any{
					"type":        "integer",
					"minimum":     0,
					"description": "With unit \"lines\": how many lines to skip. With unit \"bytes\": the byte offset to start at. Default: 0.",
				},
				"limit": map[string]any{
					"type":        "integer",
					"minimum":     1,
					"description": fmt.Sprintf("Most lines (or bytes) to return. Default and maximum: %d lines, %d bytes.", l.MaxLines, l.MaxBytes),
				},
				"unit": map[string]any{
					"type":        "string",
					"enum":        []string{"lines", "bytes"},
					"description": "What offset and limit count. Default: \"lines\".",
				},
			},
			"required":             []string{"path"},
			"additionalProperties": false,
		})
	})
}

type readInput struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Limit  int64  `json:"limit"`
	Unit   string `json:"unit"`
}

func (t *ReadFileTool) Run(ctx context.Context, raw json.RawMessage) (tools.Result, error) {
	var in readInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return tools.Result{}, tools.Errorf(event.CodeInvalidInput, "bad input: %v", err)
	}
	lim := t.Limits.withDefaults()
	sb := sandbox{root: t.Root, protect: t.Protect}
	rel, err := sb.clean(in.Path)
	if err != nil {
		return tools.Result{}, err
	}
	root, err := sb.open()
	if err != nil {
		return tools.Result{}, err
	}
	defer root.Close()
	if err := sb.guard(root).check(rel, "readable"); err != nil {
		return tools.Result{}, err
	}

	f, size, err := openRegular(root, rel)
	if err != nil {
		return tools.Result{}, err
	}
	defer f.Close()
	if size == 0 {
		return tools.Text(fmt.Sprintf("(%s is empty)", rel)), nil
	}
	head := make([]byte, min(int64(sniffBytes), size))
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return tools.Result{}, describe(rel, err)
	}
	head = head[:n]
	if binary(head, int64(n) >= size) {
		return tools.Text(fmt.Sprintf("%s is a binary file (%d bytes, %s); its content is not shown.", rel, size, typeGuess(head))), nil
	}
	if in.Unit == "bytes" {
		return readBytes(f, rel, size, in, lim)
	}
	return readLines(ctx, f, rel, size, in, lim)
}

// openRegular opens rel for reading, refusing anything but a regular file
// (reading a named pipe or a device could block or never end).
func openRegular(root *os.Root, rel string) (*os.File, int64, error) {
	fi, err := root.Stat(rel)
	if err != nil {
		return nil, 0, describe(rel, err)
	}
	if fi.IsDir() {
		return nil, 0, tools.Errorf(event.CodeInvalidInput, "path %q is a directory; use list_files to list it", rel)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, tools.Errorf(event.CodeInvalidInput, "path %q: %w (it is a %s)", rel, ErrNotRegular, kind(fi.Mode()))
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, 0, describe(rel, err)
	}
	fi, err = f.Stat()
	if err != nil || !fi.Mode().IsRegular() { // replaced between Stat and OpenFile
		f.Close()
		return nil, 0, tools.Errorf(event.CodeInvalidInput, "path %q: %w", rel, ErrNotRegular)
	}
	return f, fi.Size(), nil
}

// binary reports whether head, the start of a file (all of it when complete),
// looks binary: a NUL byte, or bytes that are not UTF-8.
func binary(head []byte, complete bool) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	if !complete {
		// Forgive a character cut by the end of the sample.
		for i := 1; i <= utf8.UTFMax && i <= len(head); i++ {
			if utf8.RuneStart(head[len(head)-i]) {
				if !utf8.FullRune(head[len(head)-i:]) {
					head = head[:len(head)-i]
				}
				break
			}
		}
	}
	return !utf8.Valid(head)
}

// typeGuess names the type of a binary file from its first bytes.
func typeGuess(head []byte) string {
	t := http.DetectContentType(head)
	if t == "application/octet-stream" {
		return "type unknown"
	}
	return "looks like " + t
}

func readBytes(f *os.File, rel string, size int64, in readInput, lim Limits) (tools.Result, error) {
	if in.Offset >= size {
		return tools.Text(fmt.Sprintf("[offset %d is at or past the end of %s, which has %d bytes]", in.Offset, rel, size)), nil
	}
	n := int64(lim.MaxBytes)
	if in.Limit > 0 && in.Limit < n {
		n = in.Limit
	}
	n = min(n, size-in.Offset)
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, in.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return tools.Result{}, describe(rel, err)
	}
	buf = buf[:got]
	out := strings.ToValidUTF8(string(buf), "\uFFFD")
	if end := in.Offset + int64(got); end < size {
		out += fmt.Sprintf("\n[truncated: showed bytes %d to %d of %d; continue with {\"unit\": \"bytes\", \"offset\": %d}]", in.Offset, end-1, size, end)
	}
	return tools.Text(out), nil
}

func readLines(ctx context.Context, f *os.File, rel string, size int64, in readInput, lim Limits) (tools.Result, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 64*1024)
	var pos int64 // bytes consumed
	var skipped int64
	eof := false
	for skipped < in.Offset && !eof {
		if skipped%1024 == 0 && ctx.Err() != nil {
			return tools.Result{}, ctx.Err()
		}
		chunk, err := br.ReadSlice('\n')
		pos += int64(len(chunk))
		switch {
		case err == nil:
			skipped++
		case errors.Is(err, bufio.ErrBufferFull):
			// The line goes on.
		case errors.Is(err, io.EOF):
			eof = true
			if len(chunk) > 0 {
				skipped++
			}
		default:
			return tools.Result{}, describe(rel, err)
		}
	}
	if eof {
		return tools.Text(fmt.Sprintf("[offset %d is past the end of %s, which has %d lines]", in.Offset, rel, skipped)), nil
	}
	maxLines := int64(lim.MaxLines)
	if in.Limit > 0 && in.Limit < maxLines {
		maxLines = in.Limit
	}
	start := pos
	var buf []byte
	var lines int64
	cut := false
	for lines < maxLines && !eof {
		chunk, err := br.ReadSlice('\n')
		if room := lim.MaxBytes - len(buf); len(chunk) > room {
			buf = append(buf, chunk[:room]...)
			cut = true
			break
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			lines++
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			eof = true
			if len(chunk) > 0 {
				lines++
			}
		default:
			return tools.Result{}, describe(rel, err)
		}
	}
	if !eof && !cut {
		if _, err := br.Peek(1); errors.Is(err, io.EOF) {
			eof = true
		}
	}
	out := strings.ToValidUTF8(string(buf), "\uFFFD")
	first := in.Offset + 1
	switch {
	case cut:
		next := start + int64(len(buf))
		out += fmt.Sprintf("\n[truncated: the %d-byte output limit was reached in line %d; the file has %d bytes; continue with {\"unit\": \"bytes\", \"offset\": %d}]",
			lim.MaxBytes, in.Offset+lines+1, size, next)
	case !eof:
		out = strings.TrimSuffix(out, "\n")
		out += fmt.Sprintf("\n[truncated: showed lines %d to %d; the file has more (%d bytes in all); continue with {\"offset\": %d}]",
			first, in.Offset+lines, size, in.Offset+lines)
	}
	return tools.Text(out), nil
}
