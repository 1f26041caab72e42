package inspector

import (
	"bytes"
	"html/template"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// md renders the model's answers: CommonMark with GitHub's tables,
// strikethrough, task lists and bare links (models write those), through
// goldmark's default HTML renderer, which never passes raw HTML through (an
// HTML block or tag in the answer becomes a comment saying it was omitted)
// and drops the URLs of javascript:, vbscript:, file: and data: links but
// for images. The page's Content-Security-Policy stands behind it: no
// script, and images only from the inspector itself.
var md = goldmark.New(goldmark.WithExtensions(extension.GFM))

// markdown is s rendered as safe HTML; if the renderer fails (it does not
// on any input today), s as escaped text.
func markdown(s string) template.HTML {
	var b bytes.Buffer
	if err := md.Convert([]byte(s), &b); err != nil {
		return template.HTML("<pre class=\"text\">" + template.HTMLEscapeString(s) + "</pre>")
	}
	return template.HTML(b.String()) //nolint:gosec // goldmark without html.WithUnsafe: no raw HTML, no dangerous URLs
}
