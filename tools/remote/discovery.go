package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// Refresh discovers the tool services and keeps their tools as this
// registry's. It asks every micro service for its info ($SRV.INFO) only to
// learn the names of the tool services; a tool's record (schema, idempotent,
// ...) is taken only from the answer to its own service's verb,
// $SRV.INFO.tah-tool-<name>, which only a service allowed to serve that name
// receives (wire.RolePermissions), and only from an endpoint on
// tah.tool.<name>. The tools of a namespace (wire.ToolNamespaceGrant) are
// taken the same way from the answers to $SRV.INFO.tah-tools-<ns>, only
// from endpoints on tah.tool.<ns>.<tool>, as the tools <ns>__<tool>; a tool
// service of the same name wins over a namespace's. A service that offers
// another's tool is ignored, with a warning; so is an endpoint whose schema
// is not valid. A tenant's tools are taken the same way from the answers
// to $SRV.INFO.tah-ttool-<tenant>__<tool>, only from endpoints on
// tah.ttool.<tenant>.<tool>, and kept apart (Tenant). The tools known
// before, and those calls wait for (WaitFor), are asked for directly too (a
// tool named <ns>__<tool> at its namespace's as well). Refreshes run one at
// a time.
func (r *Registry) Refresh(ctx context.Context) error {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	r.mu.Lock()
	r.started++
	round := r.started
	var names, namespaces []string
	var tenants []tenantTool
	for _, t := range r.tools {
		switch {
		case t.tenant != "":
			tenants = append(tenants, tenantTool{t.tenant, t.name})
		case t.ns != "":
			namespaces = append(namespaces, t.ns)
		default:
			names = append(names, t.name)
		}
	}
	for key := range r.wanted {
		if _, ok := r.tools[key]; ok {
			continue
		}
		if tenant, name, ok := strings.Cut(key, "/"); ok {
			tenants = append(tenants, tenantTool{tenant, name})
			continue
		}
		names = append(names, key)
		if ns, _, ok := wire.SplitToolName(key); ok {
			namespaces = append(namespaces, ns)
		}
	}
	r.mu.Unlock()

	found, silent, err := r.discover(ctx, names, namespaces, tenants)
	if err != nil {
		return err
	}
	r.settle(round, found, silent)
	return nil
}

// ask is one request of a Refresh to the services of one name: a tool's
// (tah-tool-<tool>), a namespace's (tah-tools-<ns>) or a tenant's tool's
// (tah-ttool-<tenant>__<tool>).
type ask struct {
	service  string
	tool, ns string // one of them
	tenant   string // with tool, for a tenant's
}

// tenantTool names a tenant's tool.
type tenantTool struct{ tenant, name string }

// discovery is one Refresh's requests: the generic one, whose answers name
// services, and one per tool service or namespace, whose answers describe
// their tools. The reply subject of a service's request is <base>.<index in
// asks>, so that an answer says which request it answers.
type discovery struct {
	r     *Registry
	base  string
	asks  []ask
	asked map[string]bool // by service
	// replied[i] is set once asks[i] had a reply: an info, or the server's
	// word that no service of that name listens (no responders).
	replied []bool
	waiting int // asks without a reply
	found   map[string]*Tool
}

// discoveryBuffer holds the answers of a Refresh until they are read: two
// or more per tool (the generic request's, its service's), a namespace's
// tools having a service each.
const discoveryBuffer = 1024

// discover sends the requests of one Refresh and collects the answers until
// they stop for DiscoveryQuiet with every service asked by name having
// replied, or DiscoveryWait passed. It returns the tools found, and the asks
// that had no reply at all by then (silent): their services are slow, not
// gone (a service that is gone gets the server's no responders at once), and
// Refresh keeps the tools it knew of them. (Ending at the first quiet
// period dropped, under load, a tool whose service replied 150 ms after the
// others: a session's next request went without it.)
func (r *Registry) discover(ctx context.Context, names, namespaces []string, tenants []tenantTool) (found map[string]*Tool, silent []ask, err error) {
	d := &discovery{r: r, base: r.nc.NewInbox(), asked: map[string]bool{}, found: map[string]*Tool{}}
	ch := make(chan *nats.Msg, discoveryBuffer)
	sub, err := r.nc.ChanSubscribe(d.base+".*", ch)
	if err != nil {
		return nil, nil, fmt.Errorf("remote: discovery: %w", err)
	}
	defer sub.Unsubscribe()
	all, _ := micro.ControlSubject(micro.InfoVerb, "", "")
	if err := r.nc.PublishRequest(all, d.base+".all", nil); err != nil {
		return nil, nil, fmt.Errorf("remote: discovery: %w", err)
	}
	for _, name := range names {
		if err := d.askTool(name); err != nil {
			return nil, nil, err
		}
	}
	for _, ns := range namespaces {
		if err := d.askNamespace(ns); err != nil {
			return nil, nil, err
		}
	}
	for _, t := range tenants {
		if err := d.askTenantTool(t.tenant, t.name); err != nil {
			return nil, nil, err
		}
	}
	total := time.NewTimer(r.cfg.DiscoveryWait)
	defer total.Stop()
	var quiet <-chan time.Time
	for {
		select {
		case m := <-ch:
			if err := d.answer(m); err != nil {
				return nil, nil, err
			}
			quiet = time.After(r.cfg.DiscoveryQuiet)
		case <-quiet:
			if d.waiting == 0 {
				return d.found, nil, nil
			}
			quiet = nil // the next reply starts another quiet period
		case <-total.C:
			return d.found, d.silent(), nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// silent returns the asks that had no reply.
func (d *discovery) silent() []ask {
	var out []ask
	for i, a := range d.asks {
		if !d.replied[i] {
			out = append(out, a)
		}
	}
	return out
}

// askTool requests the info of the service of the tool named name, once.
func (d *discovery) askTool(name string) error {
	if tools.ValidName(name) != nil || name == "cancel" {
		return nil
	}
	return d.ask(ask{service: wire.ToolServicePrefix + name, tool: name})
}

// askNamespace requests the info of the services of namespace ns, once.
func (d *discovery) askNamespace(ns string) error {
	if wire.ValidToolNamespace(ns) != nil {
		return nil
	}
	return d.ask(ask{service: wire.ToolNamespaceService(ns), ns: ns})
}

// askTenantTool requests the info of the service of tenant's tool named
// name, once.
func (d *discovery) askTenantTool(tenant, name string) error {
	if event.ValidTenant(tenant) != nil || tools.ValidName(name) != nil || name == "cancel" {
		return nil
	}
	return d.ask(ask{service: wire.TenantToolService(tenant, name), tool: name, tenant: tenant})
}

func (d *discovery) ask(a ask) error {
	if d.asked[a.service] {
		return nil
	}
	d.asked[a.service] = true
	subj, err := micro.ControlSubject(micro.InfoVerb, a.service, "")
	if err != nil {
		return nil // not a name a service can have: nothing to ask
	}
	d.asks = append(d.asks, a)
	d.replied = append(d.replied, false)
	d.waiting++
	if err := d.r.nc.PublishRequest(subj, d.base+"."+strconv.Itoa(len(d.asks)-1), nil); err != nil {
		return fmt.Errorf("remote: discovery of %s: %w", a.service, err)
	}
	return nil
}

// answer reads one reply: to the generic request, it asks the services it
// names; to a service's request, it keeps the tools it describes.
func (d *discovery) answer(m *nats.Msg) error {
	token := m.Subject[len(d.base)+1:]
	if i, err := strconv.Atoi(token); err == nil && i >= 0 && i < len(d.asks) && !d.replied[i] {
		d.replied[i] = true // an info, or no responders: either way it replied
		d.waiting--
	}
	var info micro.Info
	if m.Header.Get("Status") != "" || json.Unmarshal(m.Data, &info) != nil || info.Type != micro.InfoResponseType {
		return nil // no responders, or not an info
	}
	if token == "all" {
		if name, ok := strings.CutPrefix(info.Name, wire.ToolServicePrefix); ok {
			d.r.warnForeign(info, func(subj string) bool { return subj == wire.ToolSubject(name) })
			return d.askTool(name)
		}
		if ns, ok := wire.ToolNamespaceOfService(info.Name); ok {
			d.r.warnForeign(info, func(subj string) bool { return wire.ToolOfNamespaceSubject(ns, subj) != "" })
			return d.askNamespace(ns)
		}
		if tenant, name, ok := wire.TenantToolOfService(info.Name); ok {
			d.r.warnForeign(info, func(subj string) bool { return subj == wire.TenantToolSubject(tenant, name) })
			return d.askTenantTool(tenant, name)
		}
		return nil // not a tool service
	}
	i, err := strconv.Atoi(token)
	if err != nil || i < 0 || i >= len(d.asks) {
		return nil
	}
	a := d.asks[i]
	if info.Name != a.service {
		return nil // a reply to $SRV.INFO.<service> always names that service
	}
	if a.ns == "" {
		if t, ok := d.r.toolOf(info, a.tool, a.tenant); ok {
			d.keep(t)
		}
		return nil
	}
	for _, t := range d.r.toolsOf(info, a.ns) {
		d.keep(t)
	}
	return nil
}

// keep makes t the record of its tool, unless the one kept is better: a
// tool's own service wins over a namespace's; otherwise all instances are
// equivalent, and the one of the smallest instance id is kept, the same on
// every node.
func (d *discovery) keep(t *Tool) {
	old, ok := d.found[t.key()]
	switch {
	case !ok:
	case (old.ns == "") != (t.ns == ""):
		if t.ns != "" {
			return
		}
	case t.instance >= old.instance:
		return
	}
	d.found[t.key()] = t
}

// warnForeign logs the endpoints of a tool service (or a namespace's) on
// another tool's subject, which own does not accept: they are never taken.
func (r *Registry) warnForeign(info micro.Info, own func(subject string) bool) {
	for _, ep := range info.Endpoints {
		if (strings.HasPrefix(ep.Subject, wire.ToolPrefix) || strings.HasPrefix(ep.Subject, wire.TenantToolPrefix)) && !own(ep.Subject) {
			r.cfg.Logger.Warn("remote tools: a service offers a tool it does not own; ignored",
				"service", info.Name, "instance", info.ID, "subject", ep.Subject)
		}
	}
}

// toolOf is the tool name that info, the answer of that tool's own service,
// describes: its endpoint on tah.tool.<name>, or for a tenant's tool on
// tah.ttool.<tenant>.<name>.
func (r *Registry) toolOf(info micro.Info, name, tenant string) (*Tool, bool) {
	subject := wire.ToolSubject(name)
	if tenant != "" {
		subject = wire.TenantToolSubject(tenant, name)
	}
	for _, ep := range info.Endpoints {
		if ep.Subject == subject {
			t, ok := r.record(info, ep, name, "")
			if ok {
				t.tenant = tenant
			}
			return t, ok
		}
	}
	return nil, false
}

// toolsOf are the tools that info, the answer of a service of namespace
// ns, describes: its endpoints on tah.tool.<ns>.<tool>, as <ns>__<tool>.
func (r *Registry) toolsOf(info micro.Info, ns string) []*Tool {
	var out []*Tool
	for _, ep := range info.Endpoints {
		if tool := wire.ToolOfNamespaceSubject(ns, ep.Subject); tool != "" {
			if t, ok := r.record(info, ep, ns+wire.ToolNamespaceSep+tool, ns); ok {
				out = append(out, t)
			}
		}
	}
	return out
}

// record is the tool named name of endpoint ep of info, unless its schema
// is not valid.
func (r *Registry) record(info micro.Info, ep micro.EndpointInfo, name, ns string) (*Tool, bool) {
	t := &Tool{
		reg:        r,
		name:       name,
		service:    info.Name,
		instance:   info.ID,
		subject:    ep.Subject,
		ns:         ns,
		desc:       ep.Metadata[wire.MetaToolDesc],
		idempotent: ep.Metadata[wire.MetaToolIdempotent] == "true",
		exclusive:  ep.Metadata[wire.MetaToolExclusive] == "true",
		approval:   ep.Metadata[wire.MetaToolApproval] == "always",
	}
	if t.desc == "" {
		t.desc = info.Description
	}
	if s := ep.Metadata[wire.MetaToolSchema]; s != "" {
		t.schema = json.RawMessage(s)
	}
	if _, err := tools.CompileSchema(tools.SchemaOf(t)); err != nil {
		r.cfg.Logger.Warn("remote tools: endpoint left out: bad schema", "service", info.Name, "tool", name, "err", err)
		return nil, false
	}
	if ms, err := strconv.ParseInt(ep.Metadata[wire.MetaToolTimeoutMS], 10, 64); err == nil && ms > 0 {
		t.timeout = time.Duration(ms) * time.Millisecond
	}
	return t, true
}
