package upgrade

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/wire"
)

// Errors of Copy and ConnectLegacy.
var (
	// ErrNotEmpty: a stream of the new cluster holds messages already, so a
	// copy would mix two histories.
	ErrNotEmpty = errors.New("the new cluster's stream is not empty")
	// ErrShards: the two logs have different shard counts.
	ErrShards = errors.New("the new cluster's event log has another shard count")
	// ErrSequence: a record of the event log cannot keep its sequence (the
	// old log has a gap, or something else writes into the new one).
	ErrSequence = errors.New("a record of the event log cannot keep its sequence")
	// ErrNoLegacyUser: the credentials.json names no user or password.
	ErrNoLegacyUser = errors.New("no user or password: give the credentials.json of the old cluster's data directory")
)

// Stream is what Copy did with one stream.
type Stream struct {
	Name string
	// Messages is how many it copied; Skipped says why it copied none.
	Messages int
	Skipped  string
}

func (s Stream) String() string {
	if s.Skipped != "" {
		return fmt.Sprintf("%-22s skipped: %s", s.Name, s.Skipped)
	}
	return fmt.Sprintf("%-22s %d message(s) copied", s.Name, s.Messages)
}

// runtimeStreams hold what the nodes of a cluster write about themselves
// while they run: the new nodes write their own.
var runtimeStreams = []string{"KV_" + wire.NodeBucket, "KV_" + wire.LockBucket}

// tahStream tells whether name is one of TAH's streams: the event log's
// shards (or the log of protocol 1), the inputs, the KV buckets and the
// object store.
func tahStream(name string) bool {
	return strings.HasPrefix(name, "TAH_") || strings.HasPrefix(name, "KV_tah_") || strings.HasPrefix(name, "OBJ_tah_")
}

// Copy copies every TAH stream of from (the old cluster's account) into to
// (the TAH account of the new cluster), calling done after each. It refuses
// a new stream that holds messages, and a log whose shard count differs;
// it creates, with the old configuration, a stream the new cluster lacks.
// Copy reads the old streams message by message (no consumer: the old
// nodes' work-queue consumers forbid another), so the old cluster may keep
// running, without clients.
func Copy(ctx context.Context, from, to jetstream.JetStream, done func(Stream)) ([]Stream, error) {
	var names []string
	for name := range from.StreamNames(ctx).Name() {
		if tahStream(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return nil, errors.New("the old cluster has no TAH stream in the account of its user: check --from (the old cluster's URL) and its credentials.json")
	}
	if err := sameShards(ctx, from, to); err != nil {
		return nil, err
	}
	// Every new stream is checked before anything is written: a refusal
	// leaves the new cluster as it was.
	for _, name := range names {
		if err := checkEmpty(ctx, to, name); err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
	}
	var out []Stream
	for _, name := range names {
		s, err := copyStream(ctx, from, to, name)
		if err != nil {
			return out, fmt.Errorf("stream %s: %w", name, err)
		}
		out = append(out, s)
		if done != nil {
			done(s)
		}
	}
	return out, nil
}

// sameShards checks that the new log, when the new nodes made one, has as
// many shards as the old.
func sameShards(ctx context.Context, from, to jetstream.JetStream) error {
	shards := func(js jetstream.JetStream) (string, error) {
		s, err := js.Stream(ctx, wire.EventShardStream(0))
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		return s.CachedInfo().Config.Metadata[wire.MetaShards], nil
	}
	have, err := shards(from)
	if err != nil {
		return fmt.Errorf("the old cluster's event log: %w", err)
	}
	want, err := shards(to)
	if err != nil {
		return fmt.Errorf("the new cluster's event log: %w", err)
	}
	if have != "" && want != "" && have != want {
		return fmt.Errorf("the old log has %s shards and the new %s: start the new cluster afresh with --nats-shards %s: %w", have, want, have, ErrShards)
	}
	return nil
}

func copyStream(ctx context.Context, from, to jetstream.JetStream, name string) (Stream, error) {
	out := Stream{Name: name}
	if slices.Contains(runtimeStreams, name) {
		out.Skipped = "the nodes' runtime state (the new nodes write their own)"
		return out, nil
	}
	src, err := from.Stream(ctx, name)
	if err != nil {
		return out, fmt.Errorf("the old cluster: %w", err)
	}
	state := src.CachedInfo().State
	if state.Msgs == 0 {
		out.Skipped = "empty"
		return out, nil
	}
	if err := ensureStream(ctx, to, src.CachedInfo().Config); err != nil {
		return out, err
	}
	keepSeq := name == wire.LegacyEventStream || strings.HasPrefix(name, wire.EventStreamPrefix)
	next := uint64(1) // the new stream's next sequence, for the event log
	for seq := state.FirstSeq; seq <= state.LastSeq; seq++ {
		m, err := src.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted: a KV key's older revision, an acknowledged input
		}
		if err != nil {
			return out, fmt.Errorf("read sequence %d: %w", seq, err)
		}
		if keepSeq && seq != next {
			return out, fmt.Errorf("sequence %d would be written at %d: %w", seq, next, ErrSequence)
		}
		if err := publishCopy(ctx, to, republished(m), name, seq, keepSeq); err != nil {
			return out, fmt.Errorf("write sequence %d: %w", seq, err)
		}
		next = seq + 1
		out.Messages++
	}
	return out, nil
}

// publishCopy writes m into stream of the new cluster, trying again while
// the cluster cannot answer (a stream it just made, electing its leader:
// a publish then waits for no answer until copyTry ends). A record of the
// event log keeps its sequence (it is written expecting seq-1 last), so an
// attempt whose acknowledgement was lost shows as stored when the next one is
// refused for the sequence; any other message is tried again only when no
// server took it (no responders), since it has no such check.
func publishCopy(ctx context.Context, to jetstream.JetStream, m *nats.Msg, stream string, seq uint64, keepSeq bool) error {
	var opts []jetstream.PublishOpt
	if keepSeq {
		opts = append(opts, jetstream.WithExpectLastSequence(seq-1))
	}
	for {
		actx, cancel := context.WithTimeout(ctx, copyTry)
		_, err := to.PublishMsg(actx, m, opts...)
		cancel()
		var apiErr *jetstream.APIError
		switch {
		case err == nil:
			return nil
		case keepSeq && errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant):
			if s, serr := to.Stream(ctx, stream); serr == nil && s.CachedInfo().State.LastSeq >= seq {
				return nil // an attempt before this one stored it
			}
			return err
		case ctx.Err() != nil:
			return err
		case errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders),
			keepSeq && errors.Is(err, context.DeadlineExceeded):
			select { // a no-responders answer comes at once: pace the tries
			case <-ctx.Done():
				return err
			case <-time.After(100 * time.Millisecond):
			}
		default:
			return err
		}
	}
}

// copyTry bounds one attempt of publishCopy.
const copyTry = 10 * time.Second

// ensureStream creates in the new cluster a stream it lacks, as the old one
// was configured (without the old cluster's placement).
func ensureStream(ctx context.Context, to jetstream.JetStream, cfg jetstream.StreamConfig) error {
	_, err := to.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		cfg.Placement = nil
		if _, err = to.CreateStream(ctx, cfg); err != nil {
			return fmt.Errorf("create it in the new cluster: %w", err)
		}
	}
	return err
}

// checkEmpty checks that the new cluster's stream name, which its nodes
// created at their start, holds nothing, or is not there. The nodes'
// runtime streams are not copied, and not checked.
func checkEmpty(ctx context.Context, to jetstream.JetStream, name string) error {
	if slices.Contains(runtimeStreams, name) {
		return nil
	}
	dst, err := to.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("the new cluster: %w", err)
	}
	if st := dst.CachedInfo().State; st.Msgs > 0 || st.LastSeq > 0 {
		return fmt.Errorf("it holds %d message(s) in the new cluster: copy into a cluster that has served nothing yet "+
			"(new data directories, no client connected before the copy): %w", st.Msgs, ErrNotEmpty)
	}
	return nil
}

// republished is the old message as it is written into the new stream: its
// subject (an input as a client publishes it: TAH_IN maps it to its
// partition again), its headers but the expectations its writer checked
// against the old stream, its data.
func republished(m *jetstream.RawStreamMsg) *nats.Msg {
	subject := m.Subject
	if sid, sender, ok := wire.InputOfSubject(subject); ok {
		subject = wire.InputSubject(sid, sender)
	}
	h := nats.Header{}
	for k, v := range m.Header {
		if !strings.HasPrefix(k, "Nats-Expected-") {
			h[k] = v
		}
	}
	return &nats.Msg{Subject: subject, Header: h, Data: m.Data}
}
