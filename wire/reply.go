package wire

import (
	"fmt"
	"strings"
)

// InboxPrefix starts the reply subjects every client owns: NATS's default
// inbox prefix, which nats.go, nats.js and the other clients use for their
// requests. A client credential may also be given an inbox of its own,
// _INBOX_<name>. (see CheckReplySubject).
const InboxPrefix = "_INBOX."

// CheckReplySubject reports, wrapping ErrReplySubject, why s may not be the
// Tah-Reply-To of an input: it must be a subject one can publish to (see
// ValidSubject) under _INBOX. or under _INBOX_<token>., with at least one
// token after the prefix. Those are the subjects a client owns (its
// credential lets it subscribe there and nowhere a node writes), so a node
// that publishes an outcome there can never write onto the log, another
// session's inputs, the API, a tool, node presence or $JS and $SYS subjects.
func CheckReplySubject(s string) error {
	bad := func(why string) error {
		return fmt.Errorf("%s %q %s: use a subject under %s or _INBOX_<name>. (a client's own inbox): %w",
			HeaderReplyTo, s, why, InboxPrefix, ErrReplySubject)
	}
	if !ValidSubject(s) {
		return bad("is not a subject to publish to")
	}
	first, rest, _ := strings.Cut(s, ".")
	if rest == "" {
		return bad("has nothing after its inbox prefix")
	}
	name, custom := strings.CutPrefix(first, "_INBOX_")
	if first != "_INBOX" && (!custom || name == "") {
		return bad("is not under an inbox prefix")
	}
	return nil
}
