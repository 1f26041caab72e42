package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

const tenantHelp = `tahctl tenant add NAME adds a tenant (docs/tenancy.md, docs/security.md):
a name of lower-case letters, digits and '-', starting with a letter, whose
credentials may then be issued (tahctl creds add --tenant NAME --role
client|observer USER). A tenant's credential creates, reads, drives and
follows that tenant's sessions (ids NAME.s_…) and no other's: the NATS server
refuses it every other subject. tahctl tenant ls lists the tenants with
their valid credentials and sessions; tahctl tenant rm NAME revokes every
credential of the tenant, on every server at once, and removes it (its
sessions stay: an admin still reads them). tahctl tenant set NAME
--max-sessions N --max-storage SIZE --tokens-per-day N --cost-per-day USD
--inputs-per-second N --max-running-turns N sets its quotas (none: no
limit; a limit left out stays as it is): over one, a create or a fork is
refused with quota_exceeded, a turn stops before its next LLM call until
the day's quota resets (UTC midnight) or a limit is raised, an input over
the second's rate is refused, and a turn over the running turns waits for
another to end. With an
admin credential, against a running node that embeds its NATS server (the
tenants are kept with the credentials).`

// runTenant is `tahctl tenant add|ls|rm`.
func runTenant(ctx context.Context, g *globals, args []string) error {
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	switch sub {
	case "add":
		return tenantAdd(ctx, g, args[1:])
	case "ls":
		return tenantList(ctx, g, args[1:])
	case "rm":
		return tenantRemove(ctx, g, args[1:])
	case "set":
		return tenantSet(ctx, g, args[1:])
	}
	return usageError("tahctl tenant add NAME; tahctl tenant ls; tahctl tenant set NAME --max-sessions N; tahctl tenant rm NAME",
		"tenant: the subcommands are add, ls, set and rm")
}

// tenantTarget connects to a node's credentials API, which keeps the
// tenants: unlike credentials, they cannot be added from the data
// directory while no node runs.
func tenantTarget(ctx context.Context, g *globals) (credsTarget, error) {
	t, err := credsTargetOf(ctx, g)
	if err != nil {
		return t, err
	}
	if t.api == nil {
		return t, errorf(exitUnavailable, "start the node (tah-node), or reach one with --server URL --creds admin.creds",
			"no node answers at %s: the tenants are kept in NATS, with the credentials a node issues", g.resolve().url)
	}
	return t, nil
}

// tenantNamed reads the one NAME argument of tenant add or rm (cmd) and
// connects to a node's credentials API.
func tenantNamed(ctx context.Context, g *globals, cmd string, args []string) (string, credsTarget, error) {
	pos, err := parse(g.flags("tenant "+cmd, "NAME", tenantHelp), args)
	if err != nil {
		return "", credsTarget{}, err
	}
	if len(pos) != 1 {
		return "", credsTarget{}, usageError("tahctl tenant "+cmd+" NAME (tahctl tenant ls lists them)", "give the tenant's name, once")
	}
	if err := event.ValidTenant(pos[0]); err != nil {
		return "", credsTarget{}, usageError("tenant names are lower-case letters, digits and '-', starting with a letter: tahctl tenant "+cmd+" acme", "%v", err)
	}
	t, err := tenantTarget(ctx, g)
	return pos[0], t, err
}

// tenantAdd is `tahctl tenant add NAME`.
func tenantAdd(ctx context.Context, g *globals, args []string) error {
	name, t, err := tenantNamed(ctx, g, "add", args)
	if err != nil {
		return err
	}
	defer t.close()
	added, err := t.api.AddTenant(ctx, name)
	if errors.Is(err, client.ErrConflict) {
		return errorf(exitFailed, "tahctl tenant ls lists the tenants", "tenant %s exists already", name)
	}
	if err != nil {
		return t.failed(wire.EndpointTenantsAdd, err)
	}
	if g.json {
		return printJSON(g.stdout, added)
	}
	fmt.Fprintf(g.stdout, "tenant %s added: issue its credentials with `tahctl creds add --tenant %s --role client NAME`\n", name, name)
	return nil
}

// tenantList is `tahctl tenant ls`.
func tenantList(ctx context.Context, g *globals, args []string) error {
	pos, err := parse(g.flags("tenant ls", "", tenantHelp), args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("tahctl tenant ls", "tenant ls takes no arguments, got %q", pos[0])
	}
	t, err := tenantTarget(ctx, g)
	if err != nil {
		return err
	}
	defer t.close()
	tenants, err := t.api.Tenants(ctx)
	if err != nil {
		return t.failed(wire.EndpointTenantsList, err)
	}
	if g.json {
		for _, tn := range tenants {
			if err := printJSON(g.stdout, tn); err != nil {
				return err
			}
		}
		return nil
	}
	if len(tenants) == 0 {
		fmt.Fprintln(g.stderr, "no tenants yet: `tahctl tenant add NAME` adds one")
		return nil
	}
	tb := &table{}
	tb.add(plain("NAME"), plain("CREDENTIALS"), plain("SESSIONS"), plain("STORAGE"), plain("TOKENS TODAY"), plain("COST TODAY"), plain("ADDED"))
	for _, tn := range tenants {
		var u wire.TenantUsage
		if tn.Usage != nil {
			u = *tn.Usage
		}
		// The sessions its credentials made, as its quota counts them
		// (its sub-agents' children are not: --json has every session
		// of the read model as sessions).
		l := tn.Limits
		tb.add(plain(tn.Name), plain(strconv.Itoa(tn.Credentials)), plain(whole(u.Sessions)+ofLimit(l.MaxSessions, whole)),
			plain(size(u.StorageBytes)+ofLimit(l.MaxStorage, size)),
			plain(whole(u.TokensDay)+ofLimit(l.TokensPerDay, whole)), plain(usd(u.CostDayUSD)+ofLimit(l.CostPerDay, usd)),
			plain(tn.Added.Local().Format(time.DateTime)))
	}
	return tb.write(g.stdout)
}

// ofLimit is " / N" for limit N, shown by show; nothing for none.
func ofLimit[T any](limit *T, show func(T) string) string {
	if limit == nil {
		return ""
	}
	return " / " + show(*limit)
}

// whole is a whole number for people.
func whole(n int64) string { return strconv.FormatInt(n, 10) }

// size is a number of bytes for people: 1.5 MiB.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, u := float64(n), 0
	for v >= unit && u < 4 {
		v, u = v/unit, u+1
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + []string{"B", "KiB", "MiB", "GiB", "TiB"}[u]
}

// parseSize reads a number of bytes: 1048576, 500MB (10^6), 10GiB (2^30).
func parseSize(v string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	num, mult := strings.TrimSpace(v), int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || f*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("give a size in bytes (1048576), or with a unit (500MB, 10GiB), or none for no limit")
	}
	return int64(f * float64(mult)), nil
}

// usd is an amount of US dollars for people: $0.0421.
func usd(v float64) string { return "$" + strconv.FormatFloat(v, 'f', -1, 64) }

// tenantSet is `tahctl tenant set NAME --max-sessions N --tokens-per-day N
// --cost-per-day USD`.
func tenantSet(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("tenant set", "NAME [--max-sessions N|none] [--max-storage SIZE|none] [--tokens-per-day N|none] [--cost-per-day USD|none] [--inputs-per-second N|none] [--max-running-turns N|none]", tenantHelp)
	req := wire.TenantSetRequest{}
	count := func(into **int64) func(string) error {
		return func(v string) error {
			n := int64(-1) // none: no limit
			if v != "none" {
				var err error
				if n, err = strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
					return fmt.Errorf("give a whole number of 0 or more, or none for no limit")
				}
			}
			*into = &n
			return nil
		}
	}
	fs.Func("max-sessions", "the most sessions the tenant's credentials make (create, fork), for good; none: no limit", count(&req.MaxSessions))
	fs.Func("tokens-per-day", "the most tokens its sessions' LLM calls use per UTC day; none: no limit", count(&req.TokensPerDay))
	fs.Func("inputs-per-second", "the most inputs its sessions are sent in a second (cancels are not counted); none: no limit", count(&req.InputsPerSec))
	fs.Func("max-running-turns", "the most turns of its sessions working at once (a turn over it waits); none: no limit", count(&req.MaxTurns))
	fs.Func("max-storage", "the most its sessions keep in the log and the object store: bytes, or with a unit (500MB, 10GiB); none: no limit", func(v string) error {
		n := int64(-1)
		if v != "none" {
			var err error
			if n, err = parseSize(v); err != nil {
				return err
			}
		}
		req.MaxStorage = &n
		return nil
	})
	fs.Func("cost-per-day", "the most its sessions' LLM calls cost per UTC day, in US dollars; none: no limit", func(v string) error {
		d := -1.0
		if v != "none" {
			var err error
			if d, err = strconv.ParseFloat(strings.TrimPrefix(v, "$"), 64); err != nil || d < 0 || math.IsInf(d, 0) {
				return fmt.Errorf("give an amount of US dollars (0.5), or none for no limit")
			}
		}
		req.CostPerDay = &d
		return nil
	})
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	const usage = "tahctl tenant set acme --max-sessions 100 --tokens-per-day 1000000 --cost-per-day 20 --inputs-per-second 50 (none: no limit)"
	if len(pos) != 1 {
		return usageError(usage, "give the tenant's name, once")
	}
	if err := event.ValidTenant(pos[0]); err != nil {
		return usageError(usage, "%v", err)
	}
	req.Name = pos[0]
	if req.Validate() != nil {
		return usageError(usage, "give at least one limit to set")
	}
	t, err := tenantTarget(ctx, g)
	if err != nil {
		return err
	}
	defer t.close()
	tn, err := t.api.SetTenantLimits(ctx, req)
	if errors.Is(err, client.ErrNotFound) {
		return errorf(exitNotFound, "tahctl tenant ls lists the tenants; tahctl tenant add "+req.Name+" adds it", "no tenant %s", req.Name)
	}
	if err != nil {
		return t.failed(wire.EndpointTenantsSet, err)
	}
	if g.json {
		return printJSON(g.stdout, tn)
	}
	var u wire.TenantUsage
	if tn.Usage != nil {
		u = *tn.Usage
	}
	l := tn.Limits
	none := func(s string) string {
		if s == "" {
			return " (no limit)"
		}
		return s
	}
	rate := "no limit"
	if l.InputsPerSecond != nil {
		rate = whole(*l.InputsPerSecond) + " a second"
	}
	if l.MaxRunningTurns != nil {
		rate += fmt.Sprintf(", at most %d turns running at once", *l.MaxRunningTurns)
	}
	fmt.Fprintf(g.stdout, "tenant %s's quotas: sessions %d%s, storage %s%s, tokens today %d%s, cost today %s%s, inputs %s\n", tn.Name,
		u.Sessions, none(ofLimit(l.MaxSessions, whole)), size(u.StorageBytes), none(ofLimit(l.MaxStorage, size)), u.TokensDay, none(ofLimit(l.TokensPerDay, whole)),
		usd(u.CostDayUSD), none(ofLimit(l.CostPerDay, usd)), rate)
	return nil
}

// tenantRemove is `tahctl tenant rm NAME`.
func tenantRemove(ctx context.Context, g *globals, args []string) error {
	name, t, err := tenantNamed(ctx, g, "rm", args)
	if err != nil {
		return err
	}
	defer t.close()
	removed, err := t.api.RemoveTenant(ctx, name)
	if errors.Is(err, client.ErrNotFound) {
		return errorf(exitNotFound, "tahctl tenant ls lists the tenants", "no tenant %s", name)
	}
	if err != nil {
		return t.failed(wire.EndpointTenantsRemove, err)
	}
	if g.json {
		return printJSON(g.stdout, removed)
	}
	fmt.Fprintf(g.stdout, "tenant %s removed; %d credential(s) revoked; its sessions stay (tahctl list --tenant %s)\n", name, len(removed.Revoked), name)
	return nil
}
