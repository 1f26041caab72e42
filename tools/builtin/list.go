package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
)

// ListFilesTool is list_files: it lists a directory under Root.
//
// Input: {"path": ".", "recursive": false, "max_entries": n}. Output: one entry a
// line, as a path relative to the root, sorted by name (a recursive listing is
// depth first): "docs/" for a directory, "go.mod (1234 bytes)" for a file,
// "link -> target (symlink, 12 bytes)" for a symlink, which is never followed.
// A listing cut by a limit ends with a line in square brackets that says so.
// Protected entries (see Protect) are left out, without a trace: listing names
// them no more than reading shows them.
type ListFilesTool struct {
	Root   string
	Limits Limits
	// Protect names what it refuses inside Root besides SecretPatterns.
	Protect Protect
}

var (
	_ tools.IdempotentTool = (*ListFilesTool)(nil)
)

// ListFiles returns list_files confined to root, with the default limits.
func ListFiles(root string) *ListFilesTool { return &ListFilesTool{Root: root} }

func (t *ListFilesTool) Name() string     { return "list_files" }
func (t *ListFilesTool) Idempotent() bool { return true }
func (t *ListFilesTool) Description() string {
	return "List the files and directories under a path of the project, one per line, sorted by name. " +
		"Directories end with '/', files show their size in bytes. Paths are relative to the project root " +
		"and can be passed to read_file. Set recursive to list subdirectories too."
}

func (t *ListFilesTool) Schema() json.RawMessage {
	l := t.Limits.withDefaults()
	return memo(describedKey{"list_files", "schema", l}, func() json.RawMessage {
		return mustJSON(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path": map[string]any{
					"type":        "string",
					"description": "Directory to list, relative to the project root. Default: the root (\".\").",
				},
				"recursive": map[string]any{
					"type":        "boolean",
					"description": fmt.Sprintf("List subdirectories too, depth first, down to %d levels. Default: false.", l.MaxDepth),
				},
				"max_entries": map[string]any{
					"type":        "integer",
					"minimum":     1,
					"maximum":     l.MaxEntries,
					"description": fmt.Sprintf("Most entries to return. Default and maximum: %d.", l.MaxEntries),
				},
			},
			"additionalProperties": false,
		})
	})
}

type listInput struct {
	Path       string `json:"path"`
	Recursive  bool   `json:"recursive"`
	MaxEntries int    `json:"max_entries"`
}

func (t *ListFilesTool) Run(ctx context.Context, raw json.RawMessage) (tools.Result, error) {
	var in listInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return tools.Result{}, tools.Errorf(event.CodeInvalidInput, "bad input: %v", err)
	}
	lim := t.Limits.withDefaults()
	max := lim.MaxEntries
	if in.MaxEntries > 0 && in.MaxEntries < max {
		max = in.MaxEntries
	}
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
	g := sb.guard(root)
	if err := g.check(rel, "readable"); err != nil {
		return tools.Result{}, err
	}

	fi, err := root.Stat(rel)
	if err != nil {
		return tools.Result{}, describe(rel, err)
	}
	l := &lister{ctx: ctx, root: root, guard: g, max: max, maxDepth: lim.MaxDepth, recursive: in.Recursive}
	if !fi.IsDir() {
		l.entry(rel)
	} else if err := l.walk(rel, 1); err != nil {
		return tools.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return tools.Result{}, err
	}
	if l.count == 0 {
		l.lines = append(l.lines, "(empty directory)")
	}
	if l.truncated {
		l.lines = append(l.lines, fmt.Sprintf("[truncated: listed the first %d entries; more exist. List a subdirectory, or set max_entries (at most %d).]", l.count, lim.MaxEntries))
	}
	if l.notDescended > 0 {
		l.lines = append(l.lines, fmt.Sprintf("[depth limit: %d directories at depth %d were not descended into; list them to see their contents.]", l.notDescended, lim.MaxDepth))
	}
	return tools.Text(strings.Join(l.lines, "\n")), nil
}

type lister struct {
	ctx          context.Context
	root         *os.Root
	guard        *guard
	max          int
	maxDepth     int
	recursive    bool
	lines        []string
	count        int
	truncated    bool
	notDescended int
}

// walk lists dir, whose entries are at depth.
func (l *lister) walk(dir string, depth int) error {
	names, err := readNames(l.root, dir)
	if err != nil {
		if depth == 1 {
			return describe(dir, err)
		}
		l.lines = append(l.lines, fmt.Sprintf("[%s/ cannot be listed: %v]", dir, describe(dir, err).(*tools.ToolError).Err))
		return nil
	}
	for _, name := range names {
		if l.ctx.Err() != nil || l.truncated {
			return nil
		}
		p := name
		if dir != "." {
			p = path.Join(dir, name)
		}
		fi, lerr := l.root.Lstat(p) // fi nil when it cannot be read: its name still counts
		if l.guard.entry(p, fi) {
			continue // protected, and before the limit: "more exist" must not count it
		}
		if l.count >= l.max {
			l.truncated = true
			return nil
		}
		if isDir := l.line(p, fi, lerr); isDir && l.recursive {
			if depth >= l.maxDepth {
				l.notDescended++
				continue
			}
			if err := l.walk(p, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// entry adds the line of p and reports whether p is a directory (not a symlink).
func (l *lister) entry(p string) (isDir bool) {
	fi, err := l.root.Lstat(p)
	return l.line(p, fi, err)
}

// line adds the line of p, whose Lstat gave fi and err (the one the guard
// saw: a listing's entry costs one system call, not one for the guard and
// another for its line), and reports whether p is a directory (not a
// symlink).
func (l *lister) line(p string, fi fs.FileInfo, err error) (isDir bool) {
	l.count++
	if err != nil {
		l.lines = append(l.lines, fmt.Sprintf("%s (cannot be read: %v)", p, stripPathError(err)))
		return false
	}
	switch m := fi.Mode(); {
	case m.IsDir():
		l.lines = append(l.lines, p+"/")
		return true
	case m.IsRegular():
		l.lines = append(l.lines, fmt.Sprintf("%s (%d bytes)", p, fi.Size()))
	case m&fs.ModeSymlink != 0:
		l.lines = append(l.lines, l.symlink(p))
	default:
		l.lines = append(l.lines, fmt.Sprintf("%s (%s)", p, kind(m)))
	}
	return false
}

func (l *lister) symlink(p string) string {
	target, _ := l.root.Readlink(p)
	st, err := l.root.Stat(p)
	switch {
	case isEscape(err):
		return fmt.Sprintf("%s (symlink leading outside the root)", p)
	case errors.Is(err, syscall.ELOOP):
		return fmt.Sprintf("%s -> %s (symlink loop)", p, target)
	case err != nil:
		return fmt.Sprintf("%s -> %s (broken symlink)", p, target)
	case st.IsDir():
		return fmt.Sprintf("%s -> %s (symlink to a directory, not followed)", p, target)
	case st.Mode().IsRegular():
		return fmt.Sprintf("%s -> %s (symlink, %d bytes)", p, target, st.Size())
	}
	return fmt.Sprintf("%s -> %s (symlink to a %s)", p, target, kind(st.Mode()))
}

func readNames(root *os.Root, dir string) ([]string, error) {
	f, err := root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
