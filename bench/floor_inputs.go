package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

// inputWrites are the durable writes a turn's input costs in TAH_IN, a
// work-queue stream: its store when the client publishes it, and its removal
// when the node acks it at the turn's end (the stream writes a tombstone, and
// with fsync on every write syncs it, as it does the store).
const inputWrites = 2

// floorStream is the stream where row 3's floor stores its writers' inputs:
// TAH_IN's settings (storage, retention, replicas, duplicate window) under a
// name and subjects of its own, which no node consumes.
const (
	floorStream   = "TAH_BENCH_FLOOR_IN"
	floorSubjects = "tah.bench.floor.in."
)

// inputLog is the floor's stand-in for TAH_IN.
type inputLog struct {
	js jetstream.JetStream
	s  jetstream.Stream
}

// floorInputs returns the floor's input stream, made from TAH_IN's
// configuration the first time.
func floorInputs(ctx context.Context, js jetstream.JetStream) (*inputLog, error) {
	s, err := js.Stream(ctx, floorStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		in, err := js.Stream(ctx, wire.InputStream)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", wire.InputStream, err)
		}
		cfg := in.CachedInfo().Config
		cfg.Name, cfg.Subjects, cfg.SubjectTransform, cfg.Sources, cfg.Metadata = floorStream, []string{floorSubjects + ">"}, nil, nil, nil
		cfg.Description = "tah-bench: row 3's floor, the inputs of its writers"
		s, err = js.CreateStream(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", floorStream, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", floorStream, err)
	}
	return &inputLog{js: js, s: s}, nil
}

// store publishes a run input for session sid as a client does (the same
// body and headers, its id for the duplicate window) and returns its
// sequence.
func (l *inputLog) store(ctx context.Context, sid string, maxPayload int64) (uint64, error) {
	m, _, err := natsx.NewInputMsg(sid, wire.NodeSender, wire.Input{Command: wire.CommandRun, Text: "go on"}, maxPayload)
	if err != nil {
		return 0, err
	}
	m.Subject = floorSubjects + sid
	ack, err := l.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("store the input of %s: %w", sid, err)
	}
	return ack.Sequence, nil
}

// remove deletes the input at seq, as a work-queue stream does when its
// consumer acks it.
func (l *inputLog) remove(ctx context.Context, seq uint64) error {
	if err := l.s.DeleteMsg(ctx, seq); err != nil {
		return fmt.Errorf("remove input %d: %w", seq, err)
	}
	return nil
}
