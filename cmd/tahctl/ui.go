package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal. A character device is not
// enough: /dev/null is one, and a command whose stdin is /dev/null must not
// take it for a person who can answer (x/term asks the terminal driver).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// style colours text on a terminal (unless NO_COLOR is set), and leaves it
// plain elsewhere.
type style struct{ on bool }

func newStyle(g *globals, w io.Writer) style {
	return style{on: isTerminal(w) && g.getenv("NO_COLOR") == "" && g.getenv("TERM") != "dumb"}
}

func (s style) wrap(code, text string) string {
	if !s.on || text == "" {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

func (s style) dim(t string) string   { return s.wrap("2", t) }
func (s style) bold(t string) string  { return s.wrap("1", t) }
func (s style) green(t string) string { return s.wrap("32", t) }
func (s style) red(t string) string   { return s.wrap("31", t) }
func (s style) cyan(t string) string  { return s.wrap("36", t) }
func (s style) yellow(t string) string {
	return s.wrap("33", t)
}

// spinner shows that tahctl waits, on a terminal only: the loop that owns it
// calls tick on a timer; clear erases it before anything else is written.
type spinner struct {
	w     io.Writer
	on    bool
	label string
	frame int
	shown bool
	since time.Time
}

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func (s *spinner) start(label string) {
	if s.label != label {
		s.since = time.Now()
	}
	s.label = label
}

func (s *spinner) stop() {
	s.clear()
	s.label = ""
}

func (s *spinner) tick() {
	if !s.on || s.label == "" {
		return
	}
	s.frame = (s.frame + 1) % len(spinFrames)
	el := time.Since(s.since).Truncate(100 * time.Millisecond)
	fmt.Fprintf(s.w, "\r\x1b[K\x1b[2m%s %s %s\x1b[0m", spinFrames[s.frame], s.label, el)
	s.shown = true
}

func (s *spinner) clear() {
	if s.shown {
		fmt.Fprint(s.w, "\r\x1b[K")
		s.shown = false
	}
}

// oneLine collapses whitespace and cuts s at n runes with an ellipsis: at the
// end of a word (after a space or a comma) when one ends in the last third,
// so that a tool line is not cut mid-word.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	full := []rune(s)
	r := full[:n-1]
	if full[n-1] == ' ' { // it ends a word
		return string(r) + "…"
	}
	for i := len(r) - 1; i >= len(r)*2/3 && i > 0; i-- {
		if r[i] == ' ' || r[i] == ',' {
			return strings.TrimRight(string(r[:i+1]), " ") + "…"
		}
	}
	return string(r) + "…"
}

// compactJSON prints a JSON value on one line, cut at n runes.
func compactJSON(b json.RawMessage, n int) string {
	if len(b) == 0 {
		return "{}"
	}
	var v any
	if json.Unmarshal(b, &v) == nil {
		if out, err := json.Marshal(v); err == nil {
			b = out
		}
	}
	return oneLine(string(b), n)
}

// preview describes a tool's output in about n runes: a one-line output as it
// is, a longer one as its line count and its first non-empty lines.
func preview(out string, n int) string { return previewOf(out, n, false) }

// cutPreview is preview of an output that the log keeps only the start of,
// the whole being an artifact: its first lines, said to be cut, and no line
// count (the count would be the kept start's).
func cutPreview(out string, n int) string { return previewOf(out, n, true) }

func previewOf(out string, n int, cut bool) string {
	out = strings.TrimRight(out, "\n")
	if strings.TrimSpace(out) == "" {
		return "(no output)"
	}
	lines := strings.Split(out, "\n")
	total := len(lines)
	// The line count is the whole output's: an output cut to a preview
	// (its last line says so) is told as cut, never as its preview's lines
	// (74 lines, for a 510-line file the model saw the start of).
	what := ""
	last := lines[len(lines)-1]
	switch m := briefMarker.FindStringSubmatch(last); {
	case m != nil: // a brief step's output ends with how long the whole is
		total, _ = strconv.Atoi(m[1])
		lines = lines[:len(lines)-1]
	case cutMarker.MatchString(last):
		m := cutMarker.FindStringSubmatch(last)
		whole, _ := strconv.Atoi(m[1])
		what = num(whole) + " characters, cut"
	case linesMarker.MatchString(last):
		m := linesMarker.FindStringSubmatch(last)
		what = "lines " + m[1] + "–" + m[2] + " of more"
	case strings.HasPrefix(last, "[truncated:"):
		what = "cut"
	}
	if cut && what == "" {
		what = "cut"
		if briefMarker.MatchString(last) {
			lines = lines[:len(lines)-1]
		}
	} else if what != "" {
		lines = lines[:len(lines)-1]
	} else if total == 1 {
		return oneLine(out, n)
	} else {
		what = fmt.Sprintf("%d lines", total)
	}
	var parts []string
	size := 0
	for _, l := range lines {
		if l = oneLine(l, n); l == "" {
			continue
		}
		if size += utf8.RuneCountInString(l) + 2; size > n && len(parts) > 0 {
			break
		}
		parts = append(parts, l)
	}
	return oneLine(what+": "+strings.Join(parts, ", "), n+12)
}

var (
	briefMarker = regexp.MustCompile(`^\[… (\d+) lines, \d+ characters in all\]$`)
	// cutMarker ends an output cut to a preview for the model and the log
	// (tools.Truncate): the number is the whole's length in characters.
	cutMarker = regexp.MustCompile(`^\[\w+ truncated: showing the first \d+ of (\d+) characters`)
	// linesMarker ends read_file's output of some lines of a longer file;
	// other "[truncated: ..." ends are its other cuts.
	linesMarker = regexp.MustCompile(`^\[truncated: showed lines (\d+) to (\d+);`)
)

// ms prints a duration in milliseconds for people.
func ms(d int64) string {
	switch {
	case d <= 0:
		return ""
	case d < 1000:
		return strconv.FormatInt(d, 10) + "ms"
	case d < 60_000:
		return strconv.FormatFloat(float64(d)/1000, 'f', 1, 64) + "s"
	}
	return time.Duration(d * int64(time.Millisecond)).Round(time.Second).String()
}

// num prints n with thousands separators.
func num(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + num(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// ago prints how long ago t was, for people.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Local().Format("2006-01-02")
}

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// table lays out columns for people; colours are applied after padding, so
// that escape sequences never shift a column.
type table struct {
	rows [][]cell
}

type cell struct {
	text  string
	paint func(string) string
}

func plain(s string) cell { return cell{text: s} }

func (t *table) add(cells ...cell) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c.text))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		for i, c := range r {
			text := c.text
			if i < len(r)-1 {
				text += strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c.text)+2)
			}
			if c.paint != nil {
				pad := len(text) - len(strings.TrimRight(text, " "))
				text = c.paint(strings.TrimRight(text, " ")) + strings.Repeat(" ", pad)
			}
			b.WriteString(text)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
