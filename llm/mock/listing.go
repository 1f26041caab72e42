package mock

import (
	"encoding/json"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// entry is one line of a directory listing.
type entry struct {
	path  string // slash-separated, relative, no trailing slash
	dir   bool
	depth int // indentation in a tree drawing, 0 when paths carry the depth
}

// listing is what the demo understands of a list_files result.
type listing struct {
	entries []entry
}

// parseListing reads a list_files result in any of the shapes a tool may use:
// JSON (an array of names or of {name|path, type|is_dir} objects, or an object
// holding such an array under entries/files/items/children), or text with one
// entry per line, directories marked by a trailing "/" (or a "d"/"dir" column),
// tree drawings and bullets allowed.
func parseListing(s string) listing {
	s = strings.TrimSpace(s)
	var l listing
	var v any
	if (strings.HasPrefix(s, "[") || strings.HasPrefix(s, "{")) && json.Unmarshal([]byte(s), &v) == nil {
		l.fromJSON(v, "")
		if len(l.entries) > 0 {
			return l
		}
	}
	for _, line := range strings.Split(s, "\n") {
		if e, ok := parseLine(line); ok {
			l.entries = append(l.entries, e)
		}
	}
	return l
}

func (l *listing) fromJSON(v any, parent string) {
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			l.fromJSON(x, parent)
		}
	case string:
		if e, ok := parseLine(v); ok {
			e.path = joinPath(parent, e.path)
			l.entries = append(l.entries, e)
		}
	case map[string]any:
		name := firstString(v, "path", "name", "file", "filename")
		if name == "" || name == "." || name == "./" {
			// A wrapper: {"path": ".", "entries": [...]}.
			for _, k := range []string{"entries", "files", "items", "children", "listing", "result"} {
				if x, ok := v[k]; ok {
					l.fromJSON(x, parent)
					return
				}
			}
			return
		}
		e := entry{path: strings.Trim(cleanName(name), "/"), dir: strings.HasSuffix(name, "/")}
		switch t := strings.ToLower(firstString(v, "type", "kind")); t {
		case "dir", "directory", "d", "folder":
			e.dir = true
		}
		for _, k := range []string{"is_dir", "isDir", "dir", "directory"} {
			if b, ok := v[k].(bool); ok && b {
				e.dir = true
			}
		}
		if e.path == "" {
			return
		}
		if !strings.Contains(e.path, "/") {
			e.path = joinPath(parent, e.path)
		}
		l.entries = append(l.entries, e)
		if kids, ok := v["children"]; ok {
			l.fromJSON(kids, e.path)
		}
	}
}

func firstString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "/" + name
}

var (
	treePrefix = regexp.MustCompile(`^[\s│├└─┬┼|` + "`" + `+\-*•]*`)
	typeColumn = regexp.MustCompile(`^(?i)(\[(dir|d|file|f)\]|dir|directory|file|d|f)\s+`)
	sizeSuffix = regexp.MustCompile(`\s+(\(.*\)|\[.*\]|\d+(\.\d+)?\s*[kKmMgG]?i?[bB]?(ytes)?)$`)
)

// parseLine reads one entry of a text listing; ok is false for blank lines and
// for notes (truncation markers, headers, totals).
func parseLine(line string) (entry, bool) {
	line = strings.TrimRight(line, " \t\r")
	prefix := treePrefix.FindString(line)
	rest := line[len(prefix):]
	if rest == "" {
		return entry{}, false
	}
	e := entry{depth: utf8.RuneCountInString(prefix)}
	if m := typeColumn.FindStringSubmatch(rest); m != nil {
		kind := strings.ToLower(strings.Trim(m[1], "[]"))
		e.dir = kind == "d" || kind == "dir" || kind == "directory"
		rest = rest[len(m[0]):]
	}
	if i := strings.IndexByte(rest, '\t'); i > 0 {
		rest = rest[:i]
	}
	if i := strings.Index(rest, " -> "); i > 0 {
		rest = rest[:i] // a symlink: "link -> target (...)"
	}
	for {
		cut := sizeSuffix.ReplaceAllString(rest, "")
		if cut == rest {
			break
		}
		rest = cut
	}
	rest = strings.TrimSpace(rest)
	switch {
	case rest == "", rest == ".", rest == "./":
		return entry{}, false
	case strings.HasPrefix(rest, "[") || strings.HasPrefix(rest, "(") || strings.HasPrefix(rest, "…") || strings.HasPrefix(rest, "..."):
		return entry{}, false
	case strings.HasSuffix(rest, ":") || strings.HasPrefix(strings.ToLower(rest), "total "):
		return entry{}, false
	case strings.Contains(rest, " ") && !strings.Contains(rest, "/") && !strings.Contains(rest, "."):
		return entry{}, false // a sentence, not a name
	}
	if strings.HasSuffix(rest, "/") {
		e.dir = true
	}
	e.path = strings.Trim(cleanName(rest), "/")
	if e.path == "" {
		return entry{}, false
	}
	return e, true
}

func cleanName(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "./")
	return strings.Trim(s, "`\"'")
}

// top returns the top-level entries, sorted, directories with a trailing "/"
// elided: dirs and files apart.
func (l listing) top() (dirs, files []string) {
	minDepth := -1
	for _, e := range l.entries {
		if !strings.Contains(e.path, "/") && (minDepth < 0 || e.depth < minDepth) {
			minDepth = e.depth
		}
	}
	seenDir, seenFile := map[string]bool{}, map[string]bool{}
	for _, e := range l.entries {
		name, isDir := e.path, e.dir
		if i := strings.IndexByte(name, '/'); i >= 0 {
			name, isDir = name[:i], true // a nested path implies its top directory
		} else if e.depth != minDepth {
			continue // drawn inside a directory of a tree
		}
		if isDir {
			seenDir[name] = true
		} else {
			seenFile[name] = true
		}
	}
	for d := range seenDir {
		dirs = append(dirs, d)
		delete(seenFile, d)
	}
	for f := range seenFile {
		files = append(files, f)
	}
	sort.Strings(dirs)
	sort.Strings(files)
	return dirs, files
}

// counts returns how many directories and files the whole listing shows.
func (l listing) counts() (dirs, files int) {
	seen := map[string]bool{}
	for _, e := range l.entries {
		if seen[e.path] {
			continue
		}
		seen[e.path] = true
		if e.dir {
			dirs++
		} else {
			files++
		}
	}
	return dirs, files
}

// readme returns the listing's top-level README file ("README.md" first), or "".
func (l listing) readme() string {
	_, files := l.top()
	best, rank := "", 99
	for _, f := range files {
		lower := strings.ToLower(f)
		if !strings.HasPrefix(lower, "readme") {
			continue
		}
		r := 5
		switch path.Ext(lower) {
		case ".md":
			r = 0
		case "":
			r = 1
		case ".txt", ".rst", ".markdown", ".adoc", ".org":
			r = 2
		}
		if f == "README.md" {
			r = -1
		}
		if r < rank {
			best, rank = f, r
		}
	}
	return best
}
