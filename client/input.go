package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/telemetry"
	"github.com/tah-dev/tah/wire"
)

// publishPatience bounds how long an input is tried while the input stream
// does not answer: a stream elects a leader within seconds.
const publishPatience = 15 * time.Second

// Publish sends input in (its Command set) to session sid and returns its
// id (in.ID, or a fresh one) once TAH_IN has stored it, trying again while
// the stream does not answer: every try is the same message (its
// Nats-Msg-Id is the session and the id), stored once. An input id need be
// unique only within its session. It does not wait for the work: Run, Resume,
// Cancel and Compact do. It fails with event.ErrInvalidSessionID,
// ErrMalformedInput, ErrPayloadTooLarge, ErrNoNode (no stream takes
// inputs), ErrPermissionDenied (the credential may not send inputs) or
// ErrUnavailable.
func (c *Client) Publish(ctx context.Context, sid string, in wire.Input) (string, error) {
	m, id, err := natsx.NewInputMsg(sid, c.inputSender(sid), in, c.nc.MaxPayload())
	if err != nil {
		return "", fmt.Errorf("%s input for %s: %w", in.Command, sid, err)
	}
	telemetry.Inject(ctx, m.Header) // the caller's trace goes on in the turn (W3C headers)
	return id, c.publish(ctx, sid, id, m)
}

func (c *Client) publish(ctx context.Context, sid, id string, m *nats.Msg) error {
	ctx, cancel := context.WithTimeout(ctx, publishPatience)
	defer cancel()
	err := c.publishOnce(ctx, sid, id, m)
	if errors.Is(err, ErrPermissionDenied) && m.Subject == wire.InputSubject(sid, wire.AnonymousSender) && event.TenantOf(sid) == "" {
		// A server whose user without a credential may publish only the
		// form that names nobody (set up by hand from an older protocol):
		// that form from now on, through TAH_TIN.
		c.anonUnnamed.Store(true)
		m.Subject = wire.InputSubject(sid, "")
		err = c.publishOnce(ctx, sid, id, m)
	}
	return err
}

// publishOnce publishes input m (id) of session sid on m's subject.
func (c *Client) publishOnce(ctx context.Context, sid, id string, m *nats.Msg) error {
	// A credential that may not publish inputs (an observer's) gets no
	// answer, only the server's permissions violation: guard ends the
	// publish with it at once.
	err := c.denials.guard(ctx, m.Subject, func(ctx context.Context) error {
		return natsx.Retry(ctx, natsx.PublishTry, func(ctx context.Context) error {
			_, err := c.js.PublishMsg(ctx, m)
			if (errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders)) && !c.streamExists(ctx, wire.InputStream) {
				return errNoStream // not a leader election: no TAH streams at all
			}
			return err
		}, c.retrying("publish the "+m.Header.Get(wire.HeaderCommand)+" input"))
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrPermissionDenied):
		return fmt.Errorf("input %s for %s: %w", id, sid, err)
	case errors.Is(err, errNoStream), errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("input %s for %s: no stream took it at %s (%v): %w", id, sid, c.URL(), err, ErrNoNode)
	case !errors.Is(err, context.Canceled) && natsx.Temporary(err):
		return fmt.Errorf("input %s for %s: %s did not store it (%v): %w", id, sid, wire.InputStream, err, ErrUnavailable)
	}
	return fmt.Errorf("input %s for %s: %w", id, sid, err)
}

// errNoStream: a publish found no stream, and the stream does not exist.
var errNoStream = errors.New("no such stream")

// streamExists reports whether the stream named exists, as far as one
// request can tell (an answer other than "not found" counts as yes: the
// caller retries).
func (c *Client) streamExists(ctx context.Context, name string) bool {
	_, err := c.js.Stream(ctx, name)
	return !errors.Is(err, jetstream.ErrStreamNotFound)
}

// Cancel cancels session sid's running turn or compaction and returns the
// outcome of the cancel: once the work it cancelled ended, that work's
// outcome with WasRunning set (Status cancelled, Turn, LastSeq, Usage); at
// once, the session's state, for a session that runs nothing (nothing
// happens to it). reason is recorded in agent.cancelled. It fails with
// ErrNotFound when the session does not exist: that is asked first, so that
// a mistyped id is told at once. A cancel of a turn that waits for approval
// ends it (every waiting call gets a cancelled result).
func (c *Client) Cancel(ctx context.Context, sid, reason string) (wire.Outcome, error) {
	if _, err := c.Get(ctx, sid); err != nil {
		return wire.Outcome{}, err
	}
	return c.await(ctx, sid, wire.Input{Command: wire.CommandCancel, Reason: reason})
}

// Compact summarises session sid's turns so far and returns what it did:
// nil when there was nothing to compact. It fails with ErrBusy while a turn
// runs. A summary is an LLM call: give ctx the time of one.
func (c *Client) Compact(ctx context.Context, sid string) (*wire.CompactResult, error) {
	o, err := c.await(ctx, sid, wire.Input{Command: wire.CommandCompact})
	if err != nil {
		return nil, err
	}
	return o.Compact, nil
}

// await publishes in with a reply subject of its own and waits for its
// outcome until ctx ends. A failure is a *CommandError.
func (c *Client) await(ctx context.Context, sid string, in wire.Input) (wire.Outcome, error) {
	in.ReplyTo = c.nc.NewRespInbox()
	m, id, err := natsx.NewInputMsg(sid, c.inputSender(sid), in, c.nc.MaxPayload())
	if err != nil {
		return wire.Outcome{}, fmt.Errorf("%s input for %s: %w", in.Command, sid, err)
	}
	telemetry.Inject(ctx, m.Header) // the caller's trace goes on in the turn (W3C headers)
	a := asked{sid: sid, inputID: id, command: in.Command}
	replies, errs := make(chan *nats.Msg, 4), make(chan *nats.Msg, 16)
	subs, err := c.subscribe(ctx, map[string]chan *nats.Msg{in.ReplyTo: replies, wire.ErrorSubject(sid): errs})
	if err != nil {
		return wire.Outcome{}, err
	}
	defer unsubscribe(subs)
	if err := c.publish(ctx, sid, id, m); err != nil {
		return wire.Outcome{}, err
	}
	for {
		select {
		case m := <-replies:
			if o, final, err := a.reply(m); final {
				return o, err
			}
		case m := <-errs:
			if o, mine, err := a.refused(m); mine {
				return o, err
			}
		case <-ctx.Done():
			return wire.Outcome{}, fmt.Errorf("%s %s: the node took input %s but has not said how it ended: %w", in.Command, sid, id, ctx.Err())
		}
	}
}

// subscribe subscribes each subject to its channel (the server knows the
// subscriptions when it returns, so that nothing published after is missed).
func (c *Client) subscribe(ctx context.Context, subjects map[string]chan *nats.Msg) ([]*nats.Subscription, error) {
	var subs []*nats.Subscription
	for subj, ch := range subjects {
		sub, err := c.nc.ChanSubscribe(subj, ch)
		if err != nil {
			unsubscribe(subs)
			return nil, fmt.Errorf("subscribe %s: %w", subj, err)
		}
		subs = append(subs, sub)
	}
	fctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout) // a flush needs a deadline
	defer cancel()
	if err := c.nc.FlushWithContext(fctx); err != nil {
		unsubscribe(subs)
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	return subs, nil
}

func unsubscribe(subs []*nats.Subscription) {
	for _, s := range subs {
		_ = s.Unsubscribe()
	}
}
