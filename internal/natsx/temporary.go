package natsx

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Temporary reports errors of a server, cluster or stream that is not ready
// yet, or is electing a leader: timeouts, no responders, JetStream or its
// cluster not available; and a publish whose Nats-Msg-Id is in flight (an
// earlier try of the same message, its acknowledgement lost, is still being
// replicated). Trying again a moment later helps.
//
// A request that nobody answers (nats.ErrNoResponders) counts: on a stream's
// subject it means the stream has no leader for a moment. A caller for whom it
// means something else (no service at all) tests for it before asking.
func Temporary(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrJetStreamNotEnabled) {
		return true
	}
	// The same errors in the form of nats.go's older JetStream API, which
	// parts of the newer one still return: a revocation's read of the
	// credentials' bucket got "nats: jetstream not enabled" while its server
	// applied the account's new JWT, and took it for final.
	var legacy *nats.APIError
	if errors.As(err, &legacy) {
		return Temporary(&jetstream.APIError{Code: legacy.Code, ErrorCode: jetstream.ErrorCode(legacy.ErrorCode), Description: legacy.Description})
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10004, // incomplete results
			10005, // no suitable peers for placement (a peer not seen yet)
			10008, // JetStream system temporarily unavailable
			10009, // the cluster cannot handle the request (no leader yet)
			10023, // insufficient resources (peers not known yet)
			// "duplicate message id is in process" (409): a replicated
			// stream's leader proposed an earlier try of this message id and
			// has not applied it yet. Not a refusal: the next try gets the
			// acknowledgement of that one (a duplicate ack), or stores it if
			// it was lost with a leader change.
			JSErrCodeDuplicateInProcess:
			return true
		}
		return apiErr.Code == 503 || apiErr.Code == 408
	}
	return false
}

// JSErrCodeDuplicateInProcess is nats-server's
// JSStreamDuplicateMessageConflict (10158, "duplicate message id is in
// process"), which nats.go does not name: a replicated stream's leader has
// proposed a message of the same Nats-Msg-Id and not applied it yet.
const JSErrCodeDuplicateInProcess jetstream.ErrorCode = 10158
