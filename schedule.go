package tah

import (
	"context"
	"fmt"

	"github.com/tah-dev/tah/wire"
)

// Schedule is when a scheduled input fires and what it sends
// (docs/protocol.md, Schedules): set exactly one of At, Every and Cron.
type Schedule = wire.ScheduleRequest

// ScheduledInput is a schedule as the node keeps it.
type ScheduledInput = wire.Schedule

// Schedule has JetStream send the session sched.Text at sched.At, every
// sched.Every, or on sched.Cron (sched.Session is the session's own),
// replacing a schedule of the same Name: each occurrence is an ordinary
// run of the session, queued behind a running turn, fired once in a
// cluster whatever node is up. An invalid schedule fails with a
// *client.APIError of code 400.
func (s *Session) Schedule(ctx context.Context, sched Schedule) (ScheduledInput, error) {
	c, err := s.rt.running()
	if err != nil {
		return ScheduledInput{}, err
	}
	sched.Session = s.id
	r, err := c.Schedule(ctx, sched)
	if err != nil {
		return ScheduledInput{}, fmt.Errorf("tah: %w", err)
	}
	return r, nil
}

// Schedules lists the session's schedules, by name.
func (s *Session) Schedules(ctx context.Context) ([]ScheduledInput, error) {
	c, err := s.rt.running()
	if err != nil {
		return nil, err
	}
	list, err := c.Schedules(ctx, s.id)
	if err != nil {
		return nil, fmt.Errorf("tah: %w", err)
	}
	return list, nil
}

// Unschedule removes the session's schedule name, and reports whether it
// had one (an At schedule is gone once it fired).
func (s *Session) Unschedule(ctx context.Context, name string) (bool, error) {
	c, err := s.rt.running()
	if err != nil {
		return false, err
	}
	removed, err := c.Unschedule(ctx, s.id, name)
	if err != nil {
		return false, fmt.Errorf("tah: %w", err)
	}
	return removed, nil
}
