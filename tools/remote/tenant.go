package remote

import (
	"context"
	"time"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
)

// tenantKey is the key of tenant's tool name in a Registry: tenant/name. No
// tool's name has a '/', so no tool of every tenant's has such a key, and
// Registry.Tool refuses it.
func tenantKey(tenant, name string) string { return tenant + "/" + name }

// TenantTools are the tools of one tenant that services of its tool
// credentials offer (wire.TenantToolService), as a tools.Catalog: a tenant's
// sessions get them beside every tenant's (tools.Merge), and no other
// session does. It also waits for their services as the Registry does
// (WaitFor, Expected), for the tenant's tools and every tenant's alike. Get
// one with Registry.Tenant; it costs nothing until a service of the
// tenant's is discovered.
type TenantTools struct {
	r      *Registry
	tenant string
}

var _ tools.Catalog = TenantTools{}

// Tenant is the view of tenant's own tools.
func (r *Registry) Tenant(tenant string) TenantTools { return TenantTools{r: r, tenant: tenant} }

// Tool returns the tenant's tool named name, as of the last Refresh.
func (v TenantTools) Tool(name string) (tools.Tool, bool) {
	if tools.ValidName(name) != nil {
		return nil, false
	}
	return v.r.tool(tenantKey(v.tenant, name))
}

// Schemas describes the tenant's tools, sorted by name.
func (v TenantTools) Schemas() []llm.ToolSchema { return v.r.schemas(v.tenant) }

// ServiceWait is the registry's (Config.ServiceWait).
func (v TenantTools) ServiceWait() time.Duration { return v.r.cfg.ServiceWait }

// WaitFor returns nil once a discovery that started after the call finds a
// service of the tool named name, the tenant's or every tenant's, or ctx's
// error (see Registry.WaitFor).
func (v TenantTools) WaitFor(ctx context.Context, name string) error {
	return v.r.waitFor(ctx, name, tenantKey(v.tenant, name))
}

// Expected is Registry.Expected of the tool named name, the tenant's or
// every tenant's.
func (v TenantTools) Expected(name string) (until time.Time, ok bool) {
	return v.r.expected(name, tenantKey(v.tenant, name))
}
