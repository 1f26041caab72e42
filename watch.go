package tah

import (
	"context"
	"fmt"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/wire"
)

// Turn is a turn under way, started by Session.Start or Session.StartResume:
// its outcome, and, when asked (WithEvents, WithDeltas), its events and its
// token deltas as they come. Close it when done. It is package client's
// Turn.
type Turn = client.Turn

// TurnOption asks a Turn for more than its outcome.
type TurnOption = client.TurnOption

// Delta is a token delta of a turn's LLM step.
type Delta = client.Delta

// Watch follows a session's events, every turn's, as they are appended
// (Session.Watch). It is package client's Follower.
type Watch = client.Follower

// WithEvents delivers the turn's events on Turn.Events.
func WithEvents() TurnOption { return client.WithEvents() }

// WithDeltas delivers the turn's token deltas on Turn.Deltas.
func WithDeltas() TurnOption { return client.WithDeltas() }

// Start starts a turn with input and returns it once its input is stored,
// without waiting for its end: read its Deltas and Events (see WithDeltas,
// WithEvents), wait for its Outcome, Cancel it. Close the Turn when done; the
// turn itself goes on until it ends or is cancelled.
//
//	turn, err := s.Start(ctx, "hello", tah.WithDeltas())
//	...
//	defer turn.Close()
//	for d := range turn.Deltas() {
//		fmt.Print(d.Text)
//	}
//	out, err := turn.Outcome(ctx)
func (s *Session) Start(ctx context.Context, input string, opts ...TurnOption) (*Turn, error) {
	return s.StartMessage(ctx, llm.User(input), opts...)
}

// StartMessage is Start with a full user message.
func (s *Session) StartMessage(ctx context.Context, msg llm.Message, opts ...TurnOption) (*Turn, error) {
	c, err := s.rt.running()
	if err != nil {
		return nil, err
	}
	t, err := c.Run(ctx, s.id, wire.Input{Message: &msg}, opts...)
	if err != nil {
		return nil, fmt.Errorf("tah: %w", err)
	}
	return t, nil
}

// StartResume is Resume without waiting: the Turn of the interrupted turn's
// continuation. It fails with ErrNothingToResume as Resume does, from the
// Turn's Outcome.
func (s *Session) StartResume(ctx context.Context, opts ...TurnOption) (*Turn, error) {
	c, err := s.rt.running()
	if err != nil {
		return nil, err
	}
	t, err := c.Resume(ctx, s.id, opts...)
	if err != nil {
		return nil, fmt.Errorf("tah: %w", err)
	}
	return t, nil
}

// Watch follows the session's events, of every turn and from whichever
// client, from the log's stream sequence from on (0: those appended from
// now; a Snapshot's LastSeq+1: those after it). Read Watch.Events; Close it
// when done.
func (s *Session) Watch(ctx context.Context, from uint64) (*Watch, error) {
	c, err := s.rt.running()
	if err != nil {
		return nil, err
	}
	w, err := c.Follow(ctx, s.id, from)
	if err != nil {
		return nil, fmt.Errorf("tah: watch %s: %w", s.id, err)
	}
	return w, nil
}
