package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
sessions stay: an admin still reads them). With an admin credential, against
a running node that embeds its NATS server (the tenants are kept with the
credentials).`

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
	}
	return usageError("tahctl tenant add NAME; tahctl tenant ls; tahctl tenant rm NAME", "tenant: the subcommands are add, ls and rm")
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
	tb.add(plain("NAME"), plain("CREDENTIALS"), plain("SESSIONS"), plain("ADDED"))
	for _, tn := range tenants {
		sessions := "-" // no read model on the node that answered
		if tn.Sessions != nil {
			sessions = strconv.Itoa(*tn.Sessions)
		}
		tb.add(plain(tn.Name), plain(strconv.Itoa(tn.Credentials)), plain(sessions), plain(tn.Added.Local().Format(time.DateTime)))
	}
	return tb.write(g.stdout)
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
