package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
)

// secretPatterns name what the tools always refuse, by the name of any component of
// a path, whatever its case: TAH's default data directory and the files that hold
// credentials (a NATS user's password, an nkey seed, a JWT or a .creds file).
var secretPatterns = []string{".tah", "credentials.json", "node.json", "*.creds", "*.nk", "*.seed", "*.jwt"}

// SecretPatterns returns the patterns the tools refuse even when Protect is empty.
func SecretPatterns() []string { return append([]string(nil), secretPatterns...) }

// Protect names what the tools refuse inside their root besides SecretPatterns. A
// refused path is refused however it is named: directly, with "..", through
// symlinks, in another case; listings leave it out.
type Protect struct {
	// DataDir is the node's data directory: it and everything under it are
	// refused, recognised by identity (the same directory on disk), not by name.
	DataDir string
	// Deny lists more patterns (path.Match syntax, matched without regard to
	// case). A pattern without a "/" matches the name of any component of a path,
	// as "*.pem" or "secrets"; one with a "/" matches a path relative to the
	// root, and everything under what it matches, as "config/prod" or
	// "deploy/*.env".
	Deny []string
}

// ValidatePatterns reports the first pattern of globs that path.Match cannot read.
func ValidatePatterns(globs []string) error {
	for _, g := range globs {
		if g == "" {
			return errors.New("an empty pattern")
		}
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("pattern %q: %w", g, err)
		}
	}
	return nil
}

// guard applies a Protect to one call of a tool on root.
type guard struct {
	root    *os.Root
	absRoot string
	names   []string    // lower-case patterns without a "/"
	paths   []string    // lower-case patterns with a "/"
	data    fs.FileInfo // the data directory, nil when there is none
	// rootIn says whether the root lies in the data directory, once
	// rootChecked (rootInData).
	rootChecked, rootIn bool
}

func (p Protect) guard(root *os.Root, absRoot string) *guard {
	g := &guard{root: root, absRoot: absRoot}
	for _, pat := range append(SecretPatterns(), p.Deny...) {
		pat = strings.ToLower(strings.Trim(pat, "/"))
		if strings.Contains(pat, "/") {
			g.paths = append(g.paths, pat)
		} else {
			g.names = append(g.names, pat)
		}
	}
	if p.DataDir != "" {
		g.data, _ = os.Stat(p.DataDir) // none yet: nothing to protect
	}
	return g
}

// check fails with ErrProtected when rel, a cleaned path relative to the root, or
// what its symlinks lead to, is protected; access ("readable", "writable") says
// what was refused. The refusal reads as an ordinary tool error: it names rel,
// never what rel leads to nor why it is protected.
func (g *guard) check(rel, access string) error {
	if g.protected(rel) || g.protectedTarget(rel) {
		return &tools.ToolError{Code: event.CodeToolError, Err: fmt.Errorf("path %q is not %s by tools: %w", rel, access, ErrProtected)}
	}
	return nil
}

// protected reports whether rel (cleaned, relative to the root) matches a pattern
// or lies in the data directory.
func (g *guard) protected(rel string) bool {
	if g.matches(rel) {
		return true
	}
	if g.data == nil {
		return false
	}
	// The data directory is found by identity, so that neither a case variant
	// nor a symlink above it hides it; the root's own ancestors count too, for
	// a root inside the data directory. Those are the same for every path of
	// the call: they are looked at once (rootInData).
	p := filepath.Join(g.absRoot, filepath.FromSlash(rel))
	for ; p != g.absRoot && strings.HasPrefix(p, g.absRoot+string(filepath.Separator)); p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && os.SameFile(fi, g.data) {
			return true
		}
	}
	if p == g.absRoot {
		return g.rootInData()
	}
	return inData(p, g.data) // a path that leads out of the root
}

// rootInData reports whether the root or one of its ancestors is the data
// directory, looked at on the first call.
func (g *guard) rootInData() bool {
	if !g.rootChecked {
		g.rootChecked, g.rootIn = true, inData(g.absRoot, g.data)
	}
	return g.rootIn
}

// inData reports whether p or one of its ancestors is data.
func inData(p string, data fs.FileInfo) bool {
	for ; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && os.SameFile(fi, data) {
			return true
		}
		if filepath.Dir(p) == p {
			return false
		}
	}
}

// matches reports whether a component name of rel matches a name pattern, or rel
// or one of its parents a path pattern. A pattern that cannot be read matches:
// the guard fails closed.
func (g *guard) matches(rel string) bool {
	if rel == "." {
		return false
	}
	lower := strings.ToLower(rel)
	parts := strings.Split(lower, "/")
	for i, name := range parts {
		for _, pat := range g.names {
			if ok, err := path.Match(pat, name); ok || err != nil {
				return true
			}
		}
		prefix := strings.Join(parts[:i+1], "/")
		for _, pat := range g.paths {
			if ok, err := path.Match(pat, prefix); ok || err != nil {
				return true
			}
		}
	}
	return false
}

// entry reports whether an entry of a listing is protected: p is its path and fi
// its Lstat (nil when it failed). Its directory is known not to be protected, so
// a plain entry needs only its name and, for a directory, its identity; a
// symlink is followed.
func (g *guard) entry(p string, fi fs.FileInfo) bool {
	switch {
	case g.matches(p):
		return true
	case fi == nil:
		return false
	case fi.Mode()&fs.ModeSymlink != 0:
		return g.protected(g.resolve(p))
	case fi.IsDir() && g.data != nil:
		return os.SameFile(fi, g.data)
	}
	return false
}

// protectedTarget reports whether what the symlinks of rel lead to is
// protected, when that is another path than rel (rel itself is check's to
// ask).
func (g *guard) protectedTarget(rel string) bool {
	r := g.resolve(rel)
	return r != rel && g.protected(r)
}

// maxSymlinks bounds the symlinks resolve follows, as the kernel does.
const maxSymlinks = 40

// resolve follows the symlinks of rel as os.Root does and returns the path it
// leads to, relative to the root. What cannot be resolved (a missing component,
// a link out of the root, a loop) is left as it is: os.Root refuses or reports it
// when the tool opens the path.
func (g *guard) resolve(rel string) string {
	if rel == "." {
		return rel
	}
	todo := strings.Split(rel, "/")
	var done []string
	for hops := 0; len(todo) > 0; {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case ".", "":
			continue
		case "..":
			if len(done) == 0 {
				return rel // above the root
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, name)...)
		fi, err := g.root.Lstat(cur)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, name)
			if err != nil { // missing: the rest is lexical
				return path.Clean(path.Join(append(done, todo...)...))
			}
			continue
		}
		target, err := g.root.Readlink(cur)
		if hops++; err != nil || hops > maxSymlinks || path.IsAbs(target) {
			return rel
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return "."
	}
	return path.Join(done...)
}
