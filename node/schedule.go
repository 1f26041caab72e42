package node

import (
	"context"
	"errors"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// The schedule endpoints (wire.EndpointSchedule, EndpointSchedules,
// EndpointUnschedule): a client may not write the schedules' stream, so
// the node checks what it asks (its session exists, one of at, every and
// cron, the text within the node's input limit) and stores the definition
// that JetStream fires.

func (n *Node) apiSchedule(ctx context.Context, req wire.ScheduleRequest) (wire.Schedule, error) {
	if err := n.needSession(ctx, req.Session); err != nil {
		return wire.Schedule{}, err
	}
	spec, err := req.Spec(time.Now())
	if err != nil {
		return wire.Schedule{}, badRequest("%v", err)
	}
	if limit := n.maxInputBytes(); len(req.Text) > limit {
		return wire.Schedule{}, badRequest("the schedule's text is %d bytes, over this node's input limit of %d bytes (agent.max_input_bytes)", len(req.Text), limit)
	}
	name := req.Name
	if name == "" {
		name = event.NewID("sch_")
	}
	s, err := n.bus.AddSchedule(ctx, req.Session, name, spec, req.TimeZone, req.Text)
	switch {
	case errors.Is(err, bus.ErrTooManySchedules):
		return wire.Schedule{}, &apiError{wire.APIErrConflict, err}
	case errors.Is(err, wire.ErrBadSchedule), errors.Is(err, wire.ErrMalformedInput):
		return wire.Schedule{}, badRequest("%v", err)
	}
	return s, err
}

func (n *Node) apiSchedules(ctx context.Context, req wire.SessionRequest) (wire.SchedulesReply, error) {
	if err := event.ValidSessionID(req.Session); err != nil {
		return wire.SchedulesReply{}, err
	}
	list, err := n.bus.Schedules(ctx, req.Session)
	return wire.SchedulesReply{Schedules: list}, err
}

func (n *Node) apiUnschedule(ctx context.Context, req wire.UnscheduleRequest) (wire.UnscheduleReply, error) {
	if err := event.ValidSessionID(req.Session); err != nil {
		return wire.UnscheduleReply{}, err
	}
	if err := wire.ValidScheduleName(req.Name); err != nil {
		return wire.UnscheduleReply{}, badRequest("%v", err)
	}
	removed, err := n.bus.RemoveSchedule(ctx, req.Session, req.Name)
	return wire.UnscheduleReply{Removed: removed}, err
}
