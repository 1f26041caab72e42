package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// labels collects --label K=V flags.
type labels map[string]string

func (l labels) String() string { return "" }
func (l labels) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	// The node's limits, checked here so that a label over them is an
	// error of the command line, before anything is sent.
	if err := wire.CheckLabel(k, v); err != nil {
		return err
	}
	l[k] = v
	return nil
}

const newHelp = `Creates an empty session and prints its id (on its own line, for scripts).
The limit flags give it a budget of its own: limits on each of its turns
(--turn-*) and on its turns together (--session-*), in tokens (input plus
output), US dollars and wall time (90s, 5m). The node's agent.budget, when
tighter, still wins; tahctl budget changes them later.`

// checkTenant refuses a --tenant that cannot name one, or given with an
// existing session's id (which says its tenant itself).
func checkTenant(tenant, sid string) error {
	if tenant == "" {
		return nil
	}
	if err := event.ValidTenant(tenant); err != nil {
		return usageError("tenant names are lower-case letters, digits and '-', starting with a letter: --tenant acme", "%v", err)
	}
	if sid != "" {
		return usageError("give --tenant for a new session only: an existing session's id names its tenant (acme.s_…)",
			"--tenant %s with -s %s", tenant, sid)
	}
	return nil
}

// runNew is `tahctl new`: create a session and print its id.
func runNew(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("new", "[--tenant NAME] [--label K=V]... [--turn-tokens N] [--turn-cost USD] [--turn-time DURATION] [--session-tokens N] [--session-cost USD] [--session-time DURATION]", newHelp)
	ls := labels{}
	fs.Var(ls, "label", "a label `K=V` of the session (repeatable)")
	tenant := fs.String("tenant", "", "make it a session of tenant `NAME` (its id NAME.s_…)")
	var lf limitFlags
	lf.register(fs, "", "0: no limit")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("`tahctl send TEXT` creates a session and sends TEXT", "new takes no arguments, got %q", pos[0])
	}
	if err := checkTenant(*tenant, ""); err != nil {
		return err
	}
	if err := wire.CheckLabels(ls); err != nil {
		return usageError(fmt.Sprintf("at most %d labels, %d bytes in all", wire.MaxLabels, wire.MaxLabelsBytes), "%v", err)
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.Create(ctx, wire.CreateRequest{Tenant: *tenant, Labels: ls, Budget: lf.budget()})
	if err != nil {
		return c.failed(wire.EndpointCreate, err)
	}
	if g.json {
		return printJSON(g.stdout, r)
	}
	_, err = fmt.Fprintln(g.stdout, r.Session)
	return err
}
