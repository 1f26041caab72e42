package inspector

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

// page is what every template gets: its title, the CSRF token of its forms, whether a
// logout button is shown, and the page's own data.
type page struct {
	Title  string
	CSRF   string
	Logout bool
	Data   any
}

// render executes the template name into a buffer first, so that a
// template's error is a clean 500, never half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	var b bytes.Buffer
	p := page{Title: title, CSRF: csrfToken(w, r), Logout: h.opts.Token != "", Data: data}
	if err := h.pages.ExecuteTemplate(&b, name, p); err != nil {
		h.log.Error("inspector: template", "page", name, "err", err)
		http.Error(w, "the page could not be rendered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fragment executes the template name alone (a part of a page, for a live
// update).
func (h *Handler) fragment(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := h.pages.ExecuteTemplate(&b, name, data); err != nil {
		return "", err
	}
	return b.String(), nil
}

// foldAt is how long a text (a tool's output) may be before it is folded
// under its first lines; foldAnswerAt the same for an answer, which is
// what a reader came for.
const (
	foldAt       = 600
	foldAnswerAt = 4000
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"ago":       ago,
	"ms":        func(d int64) string { return (time.Duration(d) * time.Millisecond).String() },
	"tokens":    func(u llm.Usage) string { return num(u.InputTokens) + " in / " + num(u.OutputTokens) + " out" },
	"total":     func(u llm.Usage) string { return num(u.InputTokens + u.OutputTokens) },
	"cost":      func(c pricing.Cost) string { return c.String() },
	"num":       num,
	"hasSuffix": strings.HasSuffix,
	"md":        markdown,
	"clock":     func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"stamp":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 UTC") },
	"offset":    offset,
	"dur":       func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"long":      func(s string) bool { return len(s) > foldAt || strings.Count(s, "\n") > 12 },
	"longAnswer": func(s string) bool {
		return len(s) > foldAnswerAt || strings.Count(s, "\n") > 60
	},
	"lines":    func(s string) int { return min(max(strings.Count(s, "\n")+1, 2), 20) },
	"head":     head,
	"pretty":   pretty,
	"calls":    func(r *llm.Response) []llm.ToolCall { return r.ToolCalls },
	"utc":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"plural":   func(n int, one, many string) string { return map[bool]string{true: one, false: many}[n == 1] },
	"statuses": statuses,
	"stepOf": func(sid string, it itemView) stepView {
		return stepView{Session: sid, itemView: it}
	},
	"size":    size,
	"version": func() string { return assetVersion },
}

// stepView is a step as its block shows it, and its session, for the step
// template's links.
type stepView struct {
	Session string
	itemView
}

// num writes n with a comma between thousands, for people: 12,345.
func num(n int) string {
	s := strconv.Itoa(n)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// offset is a step's start after its turn's, for the waterfall: +1.25s.
func offset(d time.Duration) string {
	if d < time.Second {
		return "+" + d.Round(time.Millisecond).String()
	}
	return "+" + d.Round(10*time.Millisecond).String()
}

// size says how large n bytes are, for people.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// ago says how long ago t was, for people.
func ago(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.UTC().Format("2006-01-02")
}

// head is the start of a long text: its first lines, at most foldAt
// characters.
func head(s string) string {
	lines := strings.SplitN(s, "\n", 9)
	if len(lines) > 8 {
		s = strings.Join(lines[:8], "\n")
	}
	if len(s) > foldAt {
		cut := foldAt
		for cut > 0 && !utf8.RuneStart(s[cut]) { // never half a character
			cut--
		}
		s = s[:cut]
	}
	return s + " …"
}

// pretty indents JSON (a tool's input); anything else is shown as it is.
func pretty(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
