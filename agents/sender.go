package agents

import (
	"errors"

	"github.com/nats-io/nats.go/micro"
	"github.com/tah-dev/tah/wire"
)

// The sender identity of the protocol's chapter 13: a caller that signs its
// requests (an Agent-Sender header, signed with its user NKEY's seed) is
// recorded as who ran the turn (turn.started's by) and, for an answer to a
// query, who decided; a caller that does not is recorded as before (the
// node, "agent protocol caller"). NATS has already decided that the caller
// may prompt (its credential's role): the signature names who, it does not
// authorize.

// senderOf classifies the Agent-Sender header of request r (§13.7) and
// returns the caller it verified, nil for an absent or claimed one (named
// later, in the admission's goroutine: the name is a lookup). A request it
// refuses gets a non-nil error to send: a malformed header (400), a
// signature that does not verify (401, whatever MinSenderTrust), or an
// unsigned request where MinSenderTrust is signed (401).
func (g *Gateway) senderOf(r micro.Request) (*wire.AgentSender, *wire.AgentError, int) {
	s, trust, err := g.senders.Classify(r.Headers().Get(wire.HeaderAgentSender), r.Subject(), r.Data())
	switch {
	case errors.Is(err, wire.ErrMalformedAgentSender):
		return nil, &wire.AgentError{Error: wire.AgentErrBadRequest,
			Message: err.Error() + ": send it as §13.5 says (compact JSON with v 1, account and user), or none"}, wire.AgentStatusBadRequest
	case errors.Is(err, wire.ErrSenderNoncesFull):
		return nil, &wire.AgentError{Error: wire.AgentErrRateLimited,
			Message: err.Error() + ": try again in a few seconds", RetryAfterS: 5}, wire.AgentStatusRateLimited
	case err != nil:
		return nil, &wire.AgentError{Error: wire.AgentErrUnauthorized,
			Message: err.Error() + ": sign the request again (a fresh ts and nonce, the subject published to, this payload)"}, wire.AgentStatusUnauthorized
	case !trust.Meets(g.opts.MinSenderTrust):
		return nil, &wire.AgentError{Error: wire.AgentErrUnauthorized,
			Message: "this agent requires a signed Agent-Sender header (min_sender_trust " + g.opts.MinSenderTrust + "), the request's sender is " + trust.String() +
				": connect with a credential's .creds file and sign the request (§13.6)"}, wire.AgentStatusUnauthorized
	case trust == wire.SenderVerified:
		return &s, nil, 0
	}
	return nil, nil, 0
}

// AttestedToken is the sender token (wire.AttestedSenderPrefix) of a
// caller whose signature verified: its credential's name where name knows
// the caller's user NKEY (the node's registry of issued credentials), else
// the user NKEY itself, the identity the signature proves (§13.7.2). A
// name the node's own tokens take ($node, $anon) gives the NKEY instead.
func AttestedToken(s wire.AgentSender, name func(user string) string) string {
	who := s.User
	if name != nil {
		if n := name(s.User); wire.ValidCredentialName(n) == nil {
			who = n
		}
	}
	token := wire.AttestedSenderPrefix + who
	if token == wire.NodeSender || token == wire.AnonymousSender {
		token = wire.AttestedSenderPrefix + s.User
	}
	return token
}
