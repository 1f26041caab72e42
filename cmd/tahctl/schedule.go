package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/wire"
)

const scheduleHelp = `Schedules a session's input: JetStream itself sends TEXT to the session
at a time (--at), every interval (--every) or on a cron pattern (--cron), so
the session wakes up with no timer of TAH's: it fires once a time in a
cluster, whatever node is up, and survives every node's restart. Each
occurrence is an ordinary input: recorded in the log, queued behind a
running turn. --name names the schedule (one of the same name is replaced);
without it, one is made up and printed.

  tahctl schedule add ID --in 10m "check the deployment again"
  tahctl schedule add ID --at 2026-12-24T09:00:00Z "send the summary"
  tahctl schedule add ID --every 1h --name hourly "any new issues?"
  tahctl schedule add ID --cron "0 30 9 * * 1-5" --tz Europe/Paris "standup notes"
  tahctl schedule ls ID
  tahctl schedule rm ID NAME

A cron pattern has six fields, seconds first; @hourly, @daily, @weekly,
@monthly and @yearly work too.`

// runSchedule is `tahctl schedule add|ls|rm ...`.
func runSchedule(ctx context.Context, g *globals, args []string) error {
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	switch sub {
	case "add":
		return scheduleAdd(ctx, g, args[1:])
	case "ls":
		return scheduleList(ctx, g, args[1:])
	case "rm":
		return scheduleRemove(ctx, g, args[1:])
	}
	return usageError(`tahctl schedule add ID --in 10m "TEXT"; tahctl schedule ls ID; tahctl schedule rm ID NAME`,
		"schedule: the subcommands are add, ls and rm")
}

// scheduleAdd is `tahctl schedule add ID (--at T | --in D | --every D | --cron EXPR) [--name N] TEXT`.
func scheduleAdd(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("schedule add", "ID (--at TIME | --in DURATION | --every DURATION | --cron EXPR) [--name NAME] TEXT", scheduleHelp)
	at := fs.String("at", "", "fire once at `TIME` (RFC 3339: 2026-12-24T09:00:00Z)")
	in := fs.Duration("in", 0, "fire once, `DURATION` from now (10m, 1h30m)")
	every := fs.Duration("every", 0, "fire every `DURATION` (1s at least), first one interval from now")
	cron := fs.String("cron", "", "fire on the cron `PATTERN` (six fields, seconds first, or @hourly, @daily...)")
	tz := fs.String("tz", "", "the cron pattern's time `ZONE` (an IANA name; default UTC)")
	name := fs.String("name", "", "the schedule's `NAME` (letters, digits, '-' and '_'; default: made up)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usageError(`tahctl schedule add ID --in 10m "check the deployment again"`, "give the session's id and the text to send")
	}
	id, text := pos[0], strings.Join(pos[1:], " ")
	if err := checkID(id); err != nil {
		return err
	}
	req := wire.ScheduleRequest{Session: id, Name: *name, Cron: *cron, TimeZone: *tz, Text: text}
	if *every != 0 {
		req.Every = every.String()
	}
	switch {
	case *at != "" && *in != 0:
		return usageError("", "--at and --in both say when: give one")
	case *at != "":
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			return usageError("--at 2026-12-24T09:00:00Z (or --in 10m)", "--at %q is not an RFC 3339 time: %v", *at, err)
		}
		req.At = t
	case *in < 0:
		return usageError("--in 10m", "--in %v is negative", *in)
	case *in != 0:
		req.At = time.Now().Add(*in)
	}
	if _, err := req.Spec(time.Now()); err != nil {
		return usageError(`tahctl schedule add ID --in 10m "TEXT" (or --at, --every, --cron: one of them)`, "%s", strings.TrimSuffix(err.Error(), ": "+wire.ErrBadSchedule.Error()))
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.Schedule(ctx, req)
	if ae := (*client.APIError)(nil); errors.As(err, &ae) && (ae.Code == wire.APIErrBadRequest || ae.Code == wire.APIErrConflict) {
		return errorf(exitUsage, "`tahctl schedule ls "+id+"` lists its schedules", "%s", ae.Message)
	}
	if err != nil {
		return c.failed(wire.EndpointSchedule, err)
	}
	if g.json {
		return printJSON(g.stdout, s)
	}
	_, err = fmt.Fprintf(g.stdout, "%s\n", s.Name)
	if err == nil {
		_, err = fmt.Fprintf(g.stderr, "scheduled %s: %s (remove it with: tahctl schedule rm %s %s)\n", s.Name, describeSpec(s), id, s.Name)
	}
	return err
}

// describeSpec says when a schedule fires, in words.
func describeSpec(s wire.Schedule) string {
	switch {
	case strings.HasPrefix(s.Spec, "@at "):
		t, err := time.Parse(time.RFC3339, strings.TrimPrefix(s.Spec, "@at "))
		if err != nil {
			return s.Spec
		}
		return "once, at " + t.Local().Format(time.DateTime) + " (" + time.Until(t).Round(time.Second).String() + " from now)"
	case strings.HasPrefix(s.Spec, "@every "):
		return "every " + strings.TrimPrefix(s.Spec, "@every ")
	}
	if s.TimeZone != "" {
		return "on " + s.Spec + " (" + s.TimeZone + ")"
	}
	return "on " + s.Spec + " (UTC)"
}

// scheduleList is `tahctl schedule ls ID`.
func scheduleList(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("schedule ls", "ID", scheduleHelp)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	id, err := oneID(fs, pos)
	if err != nil {
		return err
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	list, err := c.Schedules(ctx, id)
	if err != nil {
		return c.failed(wire.EndpointSchedules, err)
	}
	if g.json {
		return printJSON(g.stdout, wire.SchedulesReply{Schedules: list})
	}
	if len(list) == 0 {
		_, err := fmt.Fprintf(g.stdout, "No schedules: `tahctl schedule add %s --in 10m \"TEXT\"` adds one.\n", id)
		return err
	}
	var t table
	t.add(plain("NAME"), plain("WHEN"), plain("TEXT"), plain("ADDED"))
	for _, s := range list {
		t.add(plain(s.Name), plain(describeSpec(s)), plain(oneLine(s.Text, 60)), plain(ago(s.Created)))
	}
	return t.write(g.stdout)
}

// scheduleRemove is `tahctl schedule rm ID NAME`.
func scheduleRemove(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("schedule rm", "ID NAME", scheduleHelp)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError("tahctl schedule rm ID NAME (tahctl schedule ls ID lists the names)", "give the session's id and the schedule's name")
	}
	id, name := pos[0], pos[1]
	if err := checkID(id); err != nil {
		return err
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	removed, err := c.Unschedule(ctx, id, name)
	if ae := (*client.APIError)(nil); errors.As(err, &ae) && ae.Code == wire.APIErrBadRequest {
		return errorf(exitUsage, "`tahctl schedule ls "+id+"` lists its schedules", "%s", ae.Message)
	}
	if err != nil {
		return c.failed(wire.EndpointUnschedule, err)
	}
	if g.json {
		return printJSON(g.stdout, wire.UnscheduleReply{Removed: removed})
	}
	if !removed {
		return errorf(exitNotFound, "`tahctl schedule ls "+id+"` lists its schedules", "session %s has no schedule %q (an @at schedule is gone once it fired)", id, name)
	}
	_, err = fmt.Fprintf(g.stdout, "removed %s\n", name)
	return err
}
