package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
)

// Errors of the built-in tools. They reach the model inside a *tools.ToolError.
var (
	// ErrBadPath: a path the tools refuse to interpret (NUL bytes, backslashes,
	// URL encoding, invisible or look-alike characters, invalid UTF-8).
	ErrBadPath = errors.New("bad path")
	// ErrOutsideRoot: a path that leads outside the tool's root, by "..", by an
	// absolute path, or through a symlink.
	ErrOutsideRoot = errors.New("path leads outside the root")
	// ErrNotFound: no such file or directory.
	ErrNotFound = errors.New("no such file or directory")
	// ErrSymlinkLoop: too many levels of symbolic links.
	ErrSymlinkLoop = errors.New("symlink loop")
	// ErrNotRegular: a path that is not a regular file where one is needed.
	ErrNotRegular = errors.New("not a regular file")
	// ErrProtected: a path inside the root that the tools refuse because it holds,
	// or may hold, the node's secrets (see Protect). The model is told no more.
	ErrProtected = errors.New("protected by the node")
)

var percentEscape = regexp.MustCompile(`%[0-9A-Fa-f]{2}`)

// lookalikes are characters that render like '.', '/' or '\' and invite
// confusion in paths.
var lookalikes = map[rune]bool{
	'\u2024': true, // ONE DOT LEADER
	'\u2025': true, // TWO DOT LEADER
	'\uFE52': true, // SMALL FULL STOP
	'\uFF0E': true, // FULLWIDTH FULL STOP
	'\u3002': true, // IDEOGRAPHIC FULL STOP
	'\uFF61': true, // HALFWIDTH IDEOGRAPHIC FULL STOP
	'\u2215': true, // DIVISION SLASH
	'\u2044': true, // FRACTION SLASH
	'\u29F8': true, // BIG SOLIDUS
	'\uFF0F': true, // FULLWIDTH SOLIDUS
	'\u29F5': true, // REVERSE SOLIDUS OPERATOR
	'\uFE68': true, // SMALL REVERSE SOLIDUS
	'\uFF3C': true, // FULLWIDTH REVERSE SOLIDUS
}

// sandbox confines paths to a root directory. Every file operation goes through an
// os.Root, which confines by construction (no "..", absolute path or symlink may
// leave it); clean rejects what is suspicious before that, with a message the
// model can act on.
type sandbox struct {
	root    string
	protect Protect
}

// clean turns the path the model gave into a slash-separated path relative to the
// root, or fails with a *tools.ToolError (code invalid_input) wrapping ErrBadPath
// or ErrOutsideRoot.
func (s sandbox) clean(p string) (string, error) {
	bad := func(format string, args ...any) error {
		return &tools.ToolError{Code: event.CodeInvalidInput, Err: fmt.Errorf("path %q: %w: %s", p, ErrBadPath, fmt.Sprintf(format, args...))}
	}
	if p == "" {
		return ".", nil
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", bad("it contains a NUL byte")
	}
	if !utf8.ValidString(p) {
		return "", bad("it is not valid UTF-8")
	}
	if strings.IndexByte(p, '\\') >= 0 {
		return "", bad("it contains a backslash; use '/' as the separator")
	}
	if m := percentEscape.FindString(p); m != "" {
		return "", bad("it looks URL-encoded (%s); give the literal path", m)
	}
	for _, r := range p {
		switch {
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			return "", bad("it contains the invisible or control character %U", r)
		case r == utf8.RuneError:
			return "", bad("it contains U+FFFD, the replacement character: the path was not valid UTF-8")
		case lookalikes[r]:
			return "", bad("it contains %U, which looks like '.', '/' or '\\'", r)
		}
	}
	outside := func(why string) error {
		return &tools.ToolError{Code: event.CodeInvalidInput, Err: fmt.Errorf("path %q: %w: %s; give a path relative to the root", p, ErrOutsideRoot, why)}
	}
	if filepath.IsAbs(p) {
		rel, ok := s.relative(filepath.Clean(p))
		if !ok {
			return "", outside("it is an absolute path outside the root")
		}
		p = rel
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", outside("'..' climbs above the root")
	}
	return c, nil
}

// relative returns abs relative to the root, if abs lies inside it (as the root
// is spelled, or with its symlinks resolved).
func (s sandbox) relative(abs string) (string, bool) {
	roots := []string{}
	if a, err := filepath.Abs(s.root); err == nil {
		roots = append(roots, a)
		if r, err := filepath.EvalSymlinks(a); err == nil && r != a {
			roots = append(roots, r)
		}
	}
	for _, r := range roots {
		rel, err := filepath.Rel(r, abs)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		return filepath.ToSlash(rel), true
	}
	return "", false
}

// open opens the root for one call.
func (s sandbox) open() (*os.Root, error) {
	r, err := os.OpenRoot(s.root)
	if err != nil {
		return nil, &tools.ToolError{Code: event.CodeToolError, Err: fmt.Errorf("the tool's root directory cannot be opened: %w", err)}
	}
	return r, nil
}

// guard returns the guard of one call on r, the opened root.
func (s sandbox) guard(r *os.Root) *guard {
	abs, err := filepath.Abs(s.root)
	if err != nil {
		abs = s.root // only the data directory's identity check uses it
	}
	return s.protect.guard(r, abs)
}

// describe turns an error of an os.Root operation on p into a *tools.ToolError the
// model understands.
func describe(p string, err error) error {
	var why error
	code := event.CodeToolError
	switch {
	case isEscape(err):
		why, code = fmt.Errorf("path %q: %w (through a symlink)", p, ErrOutsideRoot), event.CodeInvalidInput
	case errors.Is(err, syscall.ELOOP):
		why = fmt.Errorf("path %q: %w: too many levels of symbolic links", p, ErrSymlinkLoop)
	case errors.Is(err, fs.ErrNotExist):
		why = fmt.Errorf("path %q: %w", p, ErrNotFound)
	case errors.Is(err, fs.ErrPermission):
		why = fmt.Errorf("path %q: permission denied", p)
	case errors.Is(err, syscall.ENOTDIR):
		why = fmt.Errorf("path %q: a component of the path is not a directory: %w", p, ErrNotFound)
	default:
		why = fmt.Errorf("path %q: %v", p, stripPathError(err))
	}
	return &tools.ToolError{Code: code, Err: why}
}

// isEscape reports an os.Root refusal to leave the root. The standard library
// does not export its error ("path escapes from parent"), so it is matched by text.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// stripPathError keeps the cause of a *fs.PathError, whose Path may hold the
// root's absolute location.
func stripPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
