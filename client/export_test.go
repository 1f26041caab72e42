package client

import "github.com/tah-dev/tah/wire"

// LoseReplies unsubscribes t from its reply subject, as a client that was
// reconnecting when the outcome was published misses it.
func LoseReplies(t *Turn) {
	for _, s := range t.subs {
		if s.Subject != wire.ErrorSubject(t.a.sid) && s.Subject != wire.DeltaSubject(t.a.sid) {
			_ = s.Unsubscribe()
		}
	}
}
