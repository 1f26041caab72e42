package mcp

import (
	"bytes"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/tah-dev/tah/tools/builtin"
)

// Protect names the paths no call of an MCP tool may name in its arguments,
// as the built-in tools refuse them (tools/builtin.Protect): the node's data
// directory and the files that hold credentials (builtin.SecretPatterns). The
// bridge cannot know which arguments of a tool are paths, so it looks at
// every string argument of one line (nested ones too) and takes it as a path,
// absolute, or relative to Root and to the server's cwd: a call that names a
// protected path is refused before it reaches the server. A string that only
// mentions such a path (a one-line text, say) is refused too: the guard fails
// closed. Strings of more than one line (a file's content) are not paths.
type Protect struct {
	// Root is the directory relative paths are taken from (the tools' root);
	// "" is the bridge's working directory.
	Root string
	// DataDir is the node's data directory: it and everything under it are
	// refused, recognised by identity (the same directory on disk).
	DataDir string
	// Deny lists more patterns (path.Match, without regard to case) of a
	// path's component names, as builtin.Protect.Deny's without a "/".
	Deny []string
}

// maxPathArg bounds the strings taken as paths: longer ones are text.
const maxPathArg = 4096

// guard applies a Protect to the calls of one server's tools.
type guard struct {
	bases   []string // absolute directories relative paths are taken from
	names   []string // lower-case patterns of component names
	dataDir string
}

func (p Protect) guard(cwd string) *guard {
	g := &guard{dataDir: p.DataDir}
	for _, pat := range append(builtin.SecretPatterns(), p.Deny...) {
		if pat != "" && !strings.Contains(strings.Trim(pat, "/"), "/") {
			g.names = append(g.names, strings.ToLower(strings.Trim(pat, "/")))
		}
	}
	for _, d := range []string{p.Root, cwd} {
		if abs, err := filepath.Abs(d); err == nil && !containsString(g.bases, abs) {
			g.bases = append(g.bases, abs)
		}
	}
	return g
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// refused returns the first string argument of input that names a protected
// path, and whether there is one.
func (g *guard) refused(input json.RawMessage) (string, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", false // the executor validated the input: nothing to look at
	}
	return g.walk(v)
}

func (g *guard) walk(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, g.protected(v)
	case []any:
		for _, e := range v {
			if s, ok := g.walk(e); ok {
				return s, true
			}
		}
	case map[string]any:
		for _, e := range v {
			if s, ok := g.walk(e); ok {
				return s, true
			}
		}
	}
	return "", false
}

// protected reports whether s, taken as a path, names a protected one: a
// component matches a pattern, or the path (or what its symlinks lead to)
// lies in the data directory or is a credential file.
func (g *guard) protected(s string) bool {
	if s == "" || len(s) > maxPathArg || strings.ContainsAny(s, "\n\r") {
		return false
	}
	p := strings.TrimPrefix(s, "file://")
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[1:])
		}
	}
	if g.matches(p) {
		return true
	}
	var candidates []string
	if filepath.IsAbs(p) {
		candidates = []string{filepath.Clean(p)}
	} else {
		for _, b := range g.bases {
			candidates = append(candidates, filepath.Join(b, p))
		}
	}
	var data os.FileInfo
	if g.dataDir != "" {
		data, _ = os.Stat(g.dataDir) // none yet: nothing to protect
	}
	for _, c := range candidates {
		if real, err := filepath.EvalSymlinks(c); err == nil && real != c {
			if g.matches(real) || inDir(real, data) {
				return true
			}
		}
		if inDir(c, data) {
			return true
		}
	}
	return false
}

// matches reports whether a component of p (split at / and \) matches a
// pattern. A pattern that cannot be read matches: the guard fails closed.
func (g *guard) matches(p string) bool {
	for _, name := range strings.FieldsFunc(strings.ToLower(p), func(r rune) bool { return r == '/' || r == '\\' }) {
		for _, pat := range g.names {
			if ok, err := path.Match(pat, name); ok || err != nil {
				return true
			}
		}
	}
	return false
}

// inDir reports whether the absolute path p or one of its ancestors is the
// directory data (by identity, so that neither a case variant nor a symlink
// above it hides it).
func inDir(p string, data os.FileInfo) bool {
	if data == nil {
		return false
	}
	for ; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && os.SameFile(fi, data) {
			return true
		}
		if filepath.Dir(p) == p {
			return false
		}
	}
}
