package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

// The tenants (docs/tenancy.md) are kept in the registry of credentials,
// under wire.CredsTenantKeyPrefix: a tenant is what credentials are issued
// for, and the registry is where they are (and where no credential but a
// node's reaches, so no permission had to grow for it).

// tenantKey is the registry's key of tenant name.
func tenantKey(name string) string { return wire.CredsTenantKeyPrefix + name }

// tenantAdd is tah.api.creds.tenants.add.
func (a *credsAPI) tenantAdd(ctx context.Context, req wire.TenantRequest) (wire.TenantAddReply, error) {
	if err := event.ValidTenant(req.Name); err != nil {
		return wire.TenantAddReply{}, badRequest("%v", err)
	}
	t := wire.Tenant{Name: req.Name, Added: time.Now().UTC()}
	b, err := json.Marshal(t)
	if err != nil {
		return wire.TenantAddReply{}, err
	}
	_, err = a.kv.Create(ctx, tenantKey(req.Name), b)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return wire.TenantAddReply{}, &apiError{wire.APIErrConflict, fmt.Errorf("tenant %s exists already (tah.api.creds.tenants.ls lists the tenants)", req.Name)}
	}
	if err != nil {
		return wire.TenantAddReply{}, fmt.Errorf("register tenant %s: %w", req.Name, err)
	}
	a.n.log.Info("tenant added", "tenant", req.Name)
	return wire.TenantAddReply{Tenant: t}, nil
}

// usageReads bounds the tenants whose usage tenantList reads at once.
const usageReads = 16

// tenantList is tah.api.creds.tenants.ls: the tenants by name, each with
// its valid credentials and its sessions counted.
func (a *credsAPI) tenantList(ctx context.Context, _ wire.EmptyRequest) (wire.TenantsListReply, error) {
	tenants, err := a.tenants(ctx)
	if err != nil {
		return wire.TenantsListReply{}, err
	}
	creds, err := a.credentials(ctx)
	if err != nil {
		return wire.TenantsListReply{}, err
	}
	valid := map[string]int{} // by tenant
	for _, c := range creds {
		if c.Tenant != "" && !c.Revoked {
			valid[c.Tenant]++
		}
	}
	// Each tenant's usage is four counters read from the servers: read for
	// usageReads tenants at once, so that a thousand tenants take a
	// thousandth of a second's requests each rather than four in a row.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(usageReads)
	for i := range tenants {
		t := &tenants[i]
		g.Go(func() error {
			u, err := a.n.quotas.Usage(gctx, t.Name)
			t.Usage = &u
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return wire.TenantsListReply{}, err
	}
	for i := range tenants {
		t := &tenants[i]
		t.Credentials = valid[t.Name]
		if a.n.store != nil {
			n, err := a.n.store.CountTenantSessions(ctx, t.Name)
			if err != nil {
				return wire.TenantsListReply{}, err
			}
			t.Sessions = &n
		}
	}
	return wire.TenantsListReply{Tenants: tenants}, nil
}

// tenantSet is tah.api.creds.tenants.set: the tenant's limits changed as
// the request says, on its entry of the registry (compare-and-set, so that
// two admins' changes at once both hold), applied here at once and on
// every other node by its watch (package quota).
func (a *credsAPI) tenantSet(ctx context.Context, req wire.TenantSetRequest) (wire.TenantSetReply, error) {
	if err := req.Validate(); err != nil {
		return wire.TenantSetReply{}, badRequest("%v", err)
	}
	if req.CostPerDay != nil && (math.IsNaN(*req.CostPerDay) || math.IsInf(*req.CostPerDay, 0)) {
		return wire.TenantSetReply{}, badRequest("cost_usd_per_day: give a number of US dollars")
	}
	var t wire.Tenant
	for {
		var rev uint64
		var err error
		if t, rev, err = a.tenantEntry(ctx, req.Name); err != nil {
			return wire.TenantSetReply{}, err
		}
		t.Limits = req.Apply(t.Limits)
		b, err := json.Marshal(t)
		if err != nil {
			return wire.TenantSetReply{}, err
		}
		_, err = a.kv.Update(ctx, tenantKey(t.Name), b, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // another change meanwhile (or a removal): read it again
		}
		if err != nil {
			return wire.TenantSetReply{}, fmt.Errorf("set tenant %s's limits: %w", t.Name, err)
		}
		break
	}
	a.n.quotas.SetLimits(t.Name, t.Limits)
	u, err := a.n.quotas.Usage(ctx, t.Name)
	if err != nil {
		return wire.TenantSetReply{}, err
	}
	t.Usage = &u
	a.n.log.Info("tenant's limits set", "tenant", t.Name, "limits", t.Limits)
	return wire.TenantSetReply{Tenant: t}, nil
}

// tenantRemove is tah.api.creds.tenants.rm: it removes the tenant, then
// revokes its valid credentials. Its sessions stay, for the credentials of
// every tenant (an admin's) to read. The entry goes first so that a
// credential of the tenant issued meanwhile is either among those revoked
// here or revoked by add, which looks for its tenant again once the
// credential is registered.
func (a *credsAPI) tenantRemove(ctx context.Context, req wire.TenantRequest) (wire.TenantRemoveReply, error) {
	t, err := a.tenant(ctx, req.Name)
	if err != nil {
		return wire.TenantRemoveReply{}, err
	}
	if err := a.kv.Delete(ctx, tenantKey(t.Name)); err != nil {
		return wire.TenantRemoveReply{}, fmt.Errorf("remove tenant %s: %w", t.Name, err)
	}
	revoked, err := a.revokeTenant(ctx, t.Name)
	if err != nil {
		// Put it back, so that the removal can be asked again: a tenant
		// gone whose credentials still worked would be lost from sight.
		if b, merr := json.Marshal(t); merr == nil {
			_, _ = a.kv.Create(ctx, tenantKey(t.Name), b)
		}
		return wire.TenantRemoveReply{}, fmt.Errorf("revoke the credentials of tenant %s (it is kept: remove it again): %w", t.Name, err)
	}
	a.n.log.Info("tenant removed", "tenant", t.Name, "revoked", len(revoked))
	return wire.TenantRemoveReply{Tenant: t, Revoked: revoked}, nil
}

// revokeTenant revokes the valid credentials of tenant and returns them.
func (a *credsAPI) revokeTenant(ctx context.Context, tenant string) ([]wire.Credential, error) {
	creds, err := a.credentials(ctx)
	if err != nil {
		return nil, err
	}
	revoked := []wire.Credential{}
	var pubs []string
	for _, c := range creds {
		if c.Tenant == tenant && !c.Revoked {
			c.Revoked = true
			revoked, pubs = append(revoked, c), append(pubs, c.PublicKey)
		}
	}
	if len(pubs) == 0 {
		return revoked, nil
	}
	return revoked, a.updateAccount(ctx, pubs)
}

// tenant reads tenant name from the registry: an APIErrNotFound when it
// was not added (or was removed).
func (a *credsAPI) tenant(ctx context.Context, name string) (wire.Tenant, error) {
	t, _, err := a.tenantEntry(ctx, name)
	return t, err
}

// tenantEntry is tenant with the revision of its entry.
func (a *credsAPI) tenantEntry(ctx context.Context, name string) (wire.Tenant, uint64, error) {
	if err := event.ValidTenant(name); err != nil {
		return wire.Tenant{}, 0, badRequest("%v", err)
	}
	var e jetstream.KeyValueEntry
	err := natsx.Retry(ctx, natsx.PublishTry, func(ctx context.Context) error {
		var err error
		e, err = a.kv.Get(ctx, tenantKey(name))
		return err
	}, nil)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return wire.Tenant{}, 0, &apiError{wire.APIErrNotFound, fmt.Errorf("no tenant %s: add it first (tahctl tenant add %s)", name, name)}
	}
	if err != nil {
		return wire.Tenant{}, 0, fmt.Errorf("the registry's tenant %s: %w", name, err)
	}
	var t wire.Tenant
	if err := json.Unmarshal(e.Value(), &t); err != nil {
		return wire.Tenant{}, 0, fmt.Errorf("the registry's tenant %s: %w", name, err)
	}
	return t, e.Revision(), nil
}

// tenants are the tenants of the registry, by name.
func (a *credsAPI) tenants(ctx context.Context) ([]wire.Tenant, error) {
	out := []wire.Tenant{}
	err := natsx.Retry(ctx, natsx.PublishTry, func(ctx context.Context) error {
		out = out[:0]
		keys, err := a.kv.ListKeysFiltered(ctx, wire.CredsTenantKeyPrefix+"*")
		if err != nil {
			return err
		}
		defer keys.Stop()
		for key := range keys.Keys() {
			e, err := a.kv.Get(ctx, key)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				continue // removed meanwhile
			}
			if err != nil {
				return err
			}
			var t wire.Tenant
			if err := json.Unmarshal(e.Value(), &t); err != nil {
				return fmt.Errorf("the registry's entry %s: %w", key, err)
			}
			out = append(out, t)
		}
		return nil
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("the registry's tenants: %w", err)
	}
	slices.SortFunc(out, func(x, y wire.Tenant) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}
