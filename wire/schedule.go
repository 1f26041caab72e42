package wire

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Schedules: inputs that JetStream itself publishes at a time, every
// interval, or on a cron pattern (nats-server's message scheduling, 2.12+),
// so that a session wakes up with no timer of TAH's. A node stores each
// schedule as a definition in ScheduleStream on ScheduleSubject(sid, name);
// the server fires it on ScheduleFireSubject(sid), and the input stream
// sources the fired messages into the session's partition: each occurrence
// is an ordinary run input, stored once, taken in order, queued behind a
// running turn. Only nodes write ScheduleStream: clients ask the API
// (EndpointSchedule, EndpointSchedules, EndpointUnschedule), which checks
// what a schedule may be.
const (
	// ScheduleStream holds the definitions and, for a while, what they fired.
	ScheduleStream = "TAH_SCHED"
	// ScheduleSubjects is ScheduleStream's subjects.
	ScheduleSubjects = "tah.sched.>"
	// ScheduleFireSubjects is the filter of the fired inputs, whose third
	// token is the session.
	ScheduleFireSubjects = "tah.sched.fire.*"

	EndpointSchedule   = "schedule"
	EndpointSchedules  = "schedules"
	EndpointUnschedule = "unschedule"

	// MaxSchedules is the most schedules a session may have.
	MaxSchedules = 100
	// MinScheduleEvery is the shortest interval of an every schedule.
	MinScheduleEvery = time.Second
	// ScheduleFiredTTL is how long ScheduleStream keeps a fired input,
	// which the input stream sources at once.
	ScheduleFiredTTL = "24h"
	// ApprovalDeadlineSchedule names the schedule a node adds when a turn
	// starts to wait for approval with a deadline: an expired deny
	// (Decision.Expired) at the deadline.
	ApprovalDeadlineSchedule = "approval-deadline"
)

// ScheduleSubject is the subject of session sid's schedule name's definition.
func ScheduleSubject(sid, name string) string { return "tah.sched.def." + sid + "." + name }

// ScheduleDefinitions is the filter of session sid's definitions.
func ScheduleDefinitions(sid string) string { return "tah.sched.def." + sid + ".*" }

// ScheduleFireSubject is where session sid's schedules fire:
// tah.sched.fire.<sid>, two tokens for a tenant's session
// (TenantScheduleFireSubjects).
func ScheduleFireSubject(sid string) string { return "tah.sched.fire." + sid }

// TenantScheduleFireSubjects is the filter of the fired schedules of
// tenants' sessions.
const TenantScheduleFireSubjects = "tah.sched.fire.*.*"

// TenantScheduleTransform is ScheduleTransform for a tenant's session: its
// partition as TenantInputTransform computes it, and NodeSender as its
// sender.
func TenantScheduleTransform(partitions int) string {
	return fmt.Sprintf("tah.in.{{partition(%d,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}.%s", partitions, NodeSender)
}

// ScheduleTransform routes a fired input (ScheduleFireSubjects: its one
// wildcard is the session) to its session's partition of the input
// stream, as InputTransform does a published one (the same hash of the
// same token).
func ScheduleTransform(partitions int) string {
	return fmt.Sprintf("tah.in.{{partition(%d,1)}}.{{wildcard(1)}}", partitions)
}

// ErrBadSchedule wraps why a schedule request is refused.
var ErrBadSchedule = errors.New("invalid schedule")

// ScheduleRequest asks tah.api.schedule to add (or replace: same name) a
// schedule of a session: exactly one of At, Every and Cron, and the run's
// text.
type ScheduleRequest struct {
	Session string `json:"session"`
	// Name identifies the schedule in its session (1 to 64 letters, digits,
	// '-' or '_'); empty: one is made up. A schedule of that name is
	// replaced.
	Name string `json:"name,omitempty"`
	// At fires once, at that time (in the future).
	At time.Time `json:"at,omitzero"`
	// Every fires every interval (a Go duration: "10m", "1h30m"; 1s at least),
	// first one interval from now.
	Every string `json:"every,omitempty"`
	// Cron fires on a cron pattern of six fields, seconds first
	// ("0 30 9 * * 1-5": 9:30 on weekdays), or @hourly, @daily, @weekly,
	// @monthly, @yearly; in TimeZone (an IANA name; default UTC).
	Cron     string `json:"cron,omitempty"`
	TimeZone string `json:"time_zone,omitempty"`
	// Text is the user message of the run each occurrence sends.
	Text string `json:"text"`
}

// Schedule is a schedule as the API reports it.
type Schedule struct {
	Session string `json:"session"`
	Name    string `json:"name"`
	// Spec is the schedule as JetStream has it: "@at <RFC 3339 time>",
	// "@every <duration>", or the cron pattern.
	Spec     string `json:"spec"`
	TimeZone string `json:"time_zone,omitempty"`
	Text     string `json:"text"`
	// Created is when the definition was stored.
	Created time.Time `json:"created"`
}

// SchedulesReply lists a session's schedules, by name.
type SchedulesReply struct {
	Schedules []Schedule `json:"schedules"`
}

// UnscheduleRequest asks tah.api.unschedule to remove a session's schedule.
type UnscheduleRequest struct {
	Session string `json:"session"`
	Name    string `json:"name"`
}

// UnscheduleReply says whether there was such a schedule.
type UnscheduleReply struct {
	Removed bool `json:"removed"`
}

var scheduleName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidScheduleName reports, wrapping ErrBadSchedule, why name cannot name
// a schedule.
func ValidScheduleName(name string) error {
	if !scheduleName.MatchString(name) {
		return fmt.Errorf("schedule name %q: use 1 to 64 letters, digits, '-' or '_': %w", name, ErrBadSchedule)
	}
	return nil
}

// Spec checks r (but its session) and returns its JetStream schedule
// pattern; now is the time At must be after.
func (r ScheduleRequest) Spec(now time.Time) (string, error) {
	bad := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf(format+": %w", append(args, ErrBadSchedule)...)
	}
	if r.Name != "" {
		if err := ValidScheduleName(r.Name); err != nil {
			return "", err
		}
	}
	if strings.TrimSpace(r.Text) == "" {
		return bad("a schedule's text is empty: say what the session is to do when it fires")
	}
	n := 0
	for _, set := range []bool{!r.At.IsZero(), r.Every != "", r.Cron != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return bad("give exactly one of at, every and cron (got %d)", n)
	}
	if r.TimeZone != "" && r.Cron == "" {
		return bad("time_zone goes with cron only (at is an absolute time, every an interval)")
	}
	if r.TimeZone != "" {
		if _, err := time.LoadLocation(r.TimeZone); err != nil {
			return bad("time_zone %q: %v", r.TimeZone, err)
		}
	}
	switch {
	case !r.At.IsZero():
		if !r.At.After(now) {
			return bad("at %s is not in the future (it is %s now)", r.At.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
		return "@at " + r.At.UTC().Truncate(time.Second).Format(time.RFC3339), nil
	case r.Every != "":
		d, err := time.ParseDuration(r.Every)
		if err != nil {
			return bad("every %q is not a duration (10m, 1h30m): %v", r.Every, err)
		}
		if d < MinScheduleEvery || d%time.Second != 0 {
			return bad("every %s: the interval is whole seconds, %s at least", d, MinScheduleEvery)
		}
		return "@every " + d.String(), nil
	}
	cron := strings.Join(strings.Fields(r.Cron), " ")
	if strings.HasPrefix(cron, "@") {
		switch cron {
		case "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly":
			return cron, nil
		}
		return bad("cron %q: the named patterns are @hourly, @daily, @weekly, @monthly, @yearly", r.Cron)
	}
	if f := len(strings.Fields(cron)); f != 6 {
		return bad("cron %q has %d fields, want 6, seconds first (\"0 30 9 * * 1-5\": 9:30 on weekdays)", r.Cron, f)
	}
	return cron, nil
}
