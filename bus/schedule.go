package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

// Schedules (wire.ScheduleStream): definitions JetStream fires by itself,
// into the input stream, which sources them (inputStreamConfig). A stream
// that schedules must allow roll-ups (nats-server turns them on), which
// would let any publisher purge what it holds with a Nats-Rollup header: so
// the definitions live in a stream of their own that only nodes write, not
// in TAH_IN, where clients publish.

// ErrTooManySchedules: a session has wire.MaxSchedules schedules already.
var ErrTooManySchedules = errors.New("too many schedules")

// scheduleStreamConfig is the stream of the schedules' definitions (kept
// until removed, or fired for an @at) and of their fired inputs (kept
// wire.ScheduleFiredTTL: the input stream sources them at once).
func (b *Bus) scheduleStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              wire.ScheduleStream,
		Description:       "TAH schedules: definitions JetStream fires into the sessions' inputs (docs/protocol.md, Schedules)",
		Subjects:          []string{wire.ScheduleSubjects},
		Retention:         jetstream.LimitsPolicy,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgSize:        1 << 20,
		Discard:           jetstream.DiscardOld,
		Storage:           jetstream.FileStorage,
		Replicas:          b.cfg.Replicas,
		Duplicates:        wire.DuplicateWindow,
		AllowMsgSchedules: true,
		AllowRollup:       true,
		AllowMsgTTL:       true,
		Metadata:          b.metadata(),
	}
}

// inputSources are the input stream's sources: the fired schedules and the
// inputs of tenants' sessions, each routed to its session's partition.
func (b *Bus) inputSources() []*jetstream.StreamSource {
	return []*jetstream.StreamSource{{
		Name: wire.ScheduleStream,
		SubjectTransforms: []jetstream.SubjectTransformConfig{{
			Source:      wire.ScheduleFireSubjects,
			Destination: wire.ScheduleTransform(b.cfg.Partitions),
		}, {
			Source:      wire.TenantScheduleFireSubjects,
			Destination: wire.TenantScheduleTransform(b.cfg.Partitions),
		}},
	}, {
		Name: wire.TenantInputStream,
		SubjectTransforms: []jetstream.SubjectTransformConfig{{
			Source:      wire.TenantInputSubjects,
			Destination: wire.TenantInputTransform(b.cfg.Partitions),
		}, {
			Source:      wire.InputSubjects,
			Destination: wire.UnnamedInputTransform(b.cfg.Partitions),
		}},
	}}
}

// tenantInputStreamConfig is the stream of the inputs that TAH_IN's own
// subject transform (the default tenant's named inputs) does not route
// (wire.TenantInputStream): tenants' sessions', and the default tenant's
// that name no sender (tah.sess.<sid>.in). The input stream sources it:
// each is there once (its Nats-Msg-Id, as in the input stream) and for
// wire.TenantInputMaxAge, long after the input stream has it.
func (b *Bus) tenantInputStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        wire.TenantInputStream,
		Description: "TAH inputs and commands of tenants' sessions, and those that name no sender, on their way to TAH_IN (docs/protocol.md)",
		Subjects:    []string{wire.TenantInputSubjects, wire.InputSubjects},
		Retention:   jetstream.LimitsPolicy,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		MaxAge:      wire.TenantInputMaxAge,
		Discard:     jetstream.DiscardOld,
		Storage:     jetstream.FileStorage,
		Replicas:    b.cfg.Replicas,
		Duplicates:  wire.DuplicateWindow,
		Metadata:    b.metadata(),
	}
}

// sourcesString is a stream's sources as streamDiffs compares them.
func sourcesString(srcs []*jetstream.StreamSource) string {
	var out []string
	for _, s := range srcs {
		var ts []string
		for _, t := range s.SubjectTransforms {
			ts = append(ts, t.Source+" -> "+t.Destination)
		}
		out = append(out, s.Name+" ("+s.FilterSubject+strings.Join(ts, ", ")+")")
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// AddSchedule stores schedule name of session sid (replacing one of that
// name): JetStream fires a run of text on spec (wire.ScheduleRequest.Spec),
// in time zone tz for a cron pattern. Each occurrence is an input of its own
// (no id in the body: the node names it after its place in the input
// stream). It fails with ErrTooManySchedules when the session has
// wire.MaxSchedules others already.
func (b *Bus) AddSchedule(ctx context.Context, sid, name, spec, tz, text string) (wire.Schedule, error) {
	return b.AddScheduledInput(ctx, sid, name, spec, tz, wire.Input{Command: wire.CommandRun, Text: text})
}

// AddScheduledInput is AddSchedule of any input in (without an id): the
// node's own schedules send other commands (an expired deny at an approval
// deadline).
func (b *Bus) AddScheduledInput(ctx context.Context, sid, name, spec, tz string, in wire.Input) (wire.Schedule, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return wire.Schedule{}, err
	}
	if err := wire.ValidScheduleName(name); err != nil {
		return wire.Schedule{}, err
	}
	have, err := b.scheduleNames(ctx, sid)
	if err != nil {
		return wire.Schedule{}, err
	}
	if len(have) >= wire.MaxSchedules && !slices.Contains(have, name) {
		return wire.Schedule{}, fmt.Errorf("session %s has %d schedules, the most it may have: remove one first: %w", sid, len(have), ErrTooManySchedules)
	}
	in.ID = ""
	if err := in.Validate(); err != nil {
		return wire.Schedule{}, err
	}
	body, err := json.Marshal(in)
	if err != nil {
		return wire.Schedule{}, err
	}
	m := nats.NewMsg(wire.ScheduleSubject(sid, name))
	m.Data = body
	m.Header.Set(wire.HeaderCommand, string(in.Command))
	m.Header.Set(jetstream.ScheduleHeader, spec)
	m.Header.Set(jetstream.ScheduleTargetHeader, wire.ScheduleFireSubject(sid))
	m.Header.Set(jetstream.ScheduleTTLHeader, wire.ScheduleFiredTTL)
	if tz != "" {
		m.Header.Set(jetstream.ScheduleTimeZoneHeader, tz)
	}
	// The definition replaces the one of the same name, if any. Its id
	// makes a retried publish store it once (the server strips it from
	// what it fires).
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Header.Set(wire.HeaderMsgID, event.NewID("sched_"))
	if _, err := natsx.PublishRetrying(ctx, b.js, m, nil); err != nil {
		return wire.Schedule{}, fmt.Errorf("store schedule %s of session %s: %w", name, sid, err)
	}
	return wire.Schedule{Session: sid, Name: name, Spec: spec, TimeZone: tz, Text: scheduleText(in), Created: time.Now().UTC()}, nil
}

// scheduleText is what a schedule's input says, for a list: a run's text,
// or what a node's own schedule does.
func scheduleText(in wire.Input) string {
	if in.Command == wire.CommandDeny && in.Decision != nil && in.Decision.Expired {
		return "(deny the calls that wait for approval once their deadline passed)"
	}
	return in.Text
}

// scheduleNames are the names of session sid's schedules.
func (b *Bus) scheduleNames(ctx context.Context, sid string) ([]string, error) {
	s, err := b.js.Stream(ctx, wire.ScheduleStream)
	if err != nil {
		return nil, fmt.Errorf("schedules of %s: %w", sid, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(wire.ScheduleDefinitions(sid)))
	if err != nil {
		return nil, fmt.Errorf("schedules of %s: %w", sid, err)
	}
	var names []string
	for subj := range info.State.Subjects {
		names = append(names, subj[strings.LastIndexByte(subj, '.')+1:])
	}
	slices.Sort(names)
	return names, nil
}

// Schedules lists session sid's schedules, by name.
func (b *Bus) Schedules(ctx context.Context, sid string) ([]wire.Schedule, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return nil, err
	}
	names, err := b.scheduleNames(ctx, sid)
	if err != nil {
		return nil, err
	}
	s, err := b.js.Stream(ctx, wire.ScheduleStream)
	if err != nil {
		return nil, err
	}
	out := []wire.Schedule{}
	for _, name := range names {
		m, err := s.GetLastMsgForSubject(ctx, wire.ScheduleSubject(sid, name))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // fired (an @at) or removed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("schedule %s of %s: %w", name, sid, err)
		}
		in := wire.Input{Command: wire.Command(m.Header.Get(wire.HeaderCommand))}
		_ = json.Unmarshal(m.Data, &in)
		out = append(out, wire.Schedule{Session: sid, Name: name, Spec: m.Header.Get(jetstream.ScheduleHeader),
			TimeZone: m.Header.Get(jetstream.ScheduleTimeZoneHeader), Text: scheduleText(in), Created: m.Time.UTC()})
	}
	return out, nil
}

// RemoveSchedule removes session sid's schedule name, and reports whether
// there was one.
func (b *Bus) RemoveSchedule(ctx context.Context, sid, name string) (bool, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return false, err
	}
	if err := wire.ValidScheduleName(name); err != nil {
		return false, err
	}
	s, err := b.js.Stream(ctx, wire.ScheduleStream)
	if err != nil {
		return false, err
	}
	subj := wire.ScheduleSubject(sid, name)
	if _, err := s.GetLastMsgForSubject(ctx, subj); errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("schedule %s of %s: %w", name, sid, err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		return false, fmt.Errorf("remove schedule %s of %s: %w", name, sid, err)
	}
	return true, nil
}
