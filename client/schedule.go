package client

import (
	"context"

	"github.com/tah-dev/tah/wire"
)

// Schedule adds a schedule to session req.Session (or replaces the one of
// its name): JetStream sends a run of req.Text at req.At, every req.Every,
// or on req.Cron, each occurrence an ordinary input of the session (queued
// behind a running turn). An invalid request fails with an *APIError of
// code wire.APIErrBadRequest, a session with wire.MaxSchedules schedules
// with wire.APIErrConflict.
func (c *Client) Schedule(ctx context.Context, req wire.ScheduleRequest) (wire.Schedule, error) {
	if err := validSession(req.Session); err != nil {
		return wire.Schedule{}, err
	}
	return request[wire.Schedule](ctx, c, wire.EndpointSchedule, req)
}

// Schedules lists session sid's schedules, by name.
func (c *Client) Schedules(ctx context.Context, sid string) ([]wire.Schedule, error) {
	if err := validSession(sid); err != nil {
		return nil, err
	}
	r, err := request[wire.SchedulesReply](ctx, c, wire.EndpointSchedules, wire.SessionRequest{Session: sid})
	return r.Schedules, err
}

// Unschedule removes session sid's schedule name; it reports whether there
// was one. An occurrence already fired is an input like any other: cancel
// it as one.
func (c *Client) Unschedule(ctx context.Context, sid, name string) (bool, error) {
	if err := validSession(sid); err != nil {
		return false, err
	}
	r, err := request[wire.UnscheduleReply](ctx, c, wire.EndpointUnschedule, wire.UnscheduleRequest{Session: sid, Name: name})
	return r.Removed, err
}
