package natsx

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/wire"
)

// Pauses and bounds of the retries.
const (
	// RetryPause separates two tries.
	RetryPause = 100 * time.Millisecond
	// PublishTry bounds one try of PublishRetrying: a stream that elects a
	// leader answers within seconds, and a try that waits longer only delays
	// the next one.
	PublishTry = 2 * time.Second
)

// ErrNoMsgID: a message given to PublishRetrying has no Nats-Msg-Id, so that
// a retried publish could be stored twice.
var ErrNoMsgID = errors.New("message has no " + wire.HeaderMsgID)

// Retry calls try until it returns nil or an error that is not Temporary, or
// ctx ends, and returns try's last error. Each try runs under its own deadline
// of at most per; tries are RetryPause apart. onRetry, when not nil, is told
// of each temporary error before the next try (a command line says it waits).
func Retry(ctx context.Context, per time.Duration, try func(ctx context.Context) error, onRetry func(error)) error {
	for {
		tctx, cancel := context.WithTimeout(ctx, per)
		err := try(tctx)
		cancel()
		if err == nil || ctx.Err() != nil || !Temporary(err) {
			return err
		}
		if onRetry != nil {
			onRetry(err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(RetryPause):
		}
	}
}

// PublishRetrying publishes m to a stream, trying again in tries of
// PublishTry while the stream does not answer (it is electing a leader, a
// server died), until ctx ends. m must carry a Nats-Msg-Id (ErrNoMsgID
// otherwise), so that a try whose acknowledgement was lost is stored once.
// onRetry is Retry's.
func PublishRetrying(ctx context.Context, js jetstream.JetStream, m *nats.Msg, onRetry func(error)) (*jetstream.PubAck, error) {
	if m.Header.Get(wire.HeaderMsgID) == "" {
		return nil, ErrNoMsgID
	}
	var ack *jetstream.PubAck
	err := Retry(ctx, PublishTry, func(ctx context.Context) error {
		var err error
		ack, err = js.PublishMsg(ctx, m)
		return err
	}, onRetry)
	return ack, err
}
