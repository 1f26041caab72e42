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

	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// Refresh discovers the tool services and keeps their tools as this
// registry's. It asks every micro service for its info ($SRV.INFO) only to
// learn the names of the tool services; a tool's record (schema, idempotent,
// ...) is taken only from the answer to its own service's verb,
// $SRV.INFO.tah-tool-<name>, which only a service allowed to serve that name
// receives (wire.RolePermissions), and only from an endpoint on
// tah.tool.<name>. A service that offers another's tool is ignored, with a
// warning; so is an endpoint whose schema is not valid. The tools known
// before, and those calls wait for (WaitFor), are asked for directly too.
// Refreshes run one at a time.
func (r *Registry) Refresh(ctx context.Context) error {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	r.mu.Lock()
	r.started++
	round := r.started
	asked := make([]string, 0, len(r.tools)+len(r.wanted))
	for name := range r.tools {
		asked = append(asked, name)
	}
	for name := range r.wanted {
		if _, ok := r.tools[name]; !ok {
			asked = append(asked, name)
		}
	}
	r.mu.Unlock()

	found, err := r.discover(ctx, asked)
	if err != nil {
		return err
	}
	r.settle(round, found)
	return nil
}

// discovery is one Refresh's requests: the generic one, whose answers name
// services, and one per tool service, whose answers describe its tool. The
// reply subject of a tool's request is <base>.<index in names>, so that an
// answer says which request it answers.
type discovery struct {
	r     *Registry
	base  string
	names []string
	asked map[string]bool
	found map[string]*Tool
}

// discover sends the requests of one Refresh and collects the answers until
// they stop for DiscoveryQuiet, or DiscoveryWait passed.
func (r *Registry) discover(ctx context.Context, known []string) (map[string]*Tool, error) {
	d := &discovery{r: r, base: r.nc.NewInbox(), asked: map[string]bool{}, found: map[string]*Tool{}}
	ch := make(chan *nats.Msg, 256)
	sub, err := r.nc.ChanSubscribe(d.base+".*", ch)
	if err != nil {
		return nil, fmt.Errorf("remote: discovery: %w", err)
	}
	defer sub.Unsubscribe()
	all, _ := micro.ControlSubject(micro.InfoVerb, "", "")
	if err := r.nc.PublishRequest(all, d.base+".all", nil); err != nil {
		return nil, fmt.Errorf("remote: discovery: %w", err)
	}
	for _, name := range known {
		if err := d.ask(name); err != nil {
			return nil, err
		}
	}
	total := time.NewTimer(r.cfg.DiscoveryWait)
	defer total.Stop()
	var quiet <-chan time.Time
	for {
		select {
		case m := <-ch:
			if err := d.answer(m); err != nil {
				return nil, err
			}
			quiet = time.After(r.cfg.DiscoveryQuiet)
		case <-quiet:
			return d.found, nil
		case <-total.C:
			return d.found, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// ask requests the info of the service of the tool named name, once.
func (d *discovery) ask(name string) error {
	if d.asked[name] || tools.ValidName(name) != nil || name == "cancel" {
		return nil
	}
	d.asked[name] = true
	d.names = append(d.names, name)
	subj, err := micro.ControlSubject(micro.InfoVerb, wire.ToolServicePrefix+name, "")
	if err != nil {
		return nil // not a name a service can have: nothing to ask
	}
	if err := d.r.nc.PublishRequest(subj, d.base+"."+strconv.Itoa(len(d.names)-1), nil); err != nil {
		return fmt.Errorf("remote: discovery of %s: %w", name, err)
	}
	return nil
}

// answer reads one reply: to the generic request, it asks the services it
// names; to a tool's request, it keeps the tool.
func (d *discovery) answer(m *nats.Msg) error {
	var info micro.Info
	if m.Header.Get("Status") != "" || json.Unmarshal(m.Data, &info) != nil || info.Type != micro.InfoResponseType {
		return nil // no responders, or not an info
	}
	token := m.Subject[len(d.base)+1:]
	if token == "all" {
		name, ok := strings.CutPrefix(info.Name, wire.ToolServicePrefix)
		if !ok {
			return nil // not a tool service
		}
		d.r.warnForeign(info, name)
		return d.ask(name)
	}
	i, err := strconv.Atoi(token)
	if err != nil || i < 0 || i >= len(d.names) {
		return nil
	}
	name := d.names[i]
	if info.Name != wire.ToolServicePrefix+name {
		return nil // a reply to $SRV.INFO.tah-tool-<name> always names that service
	}
	if t, ok := d.r.toolOf(info, name); ok {
		if old, ok := d.found[name]; !ok || t.instance < old.instance {
			d.found[name] = t // all instances are equivalent: keep one, the same on every node
		}
	}
	return nil
}

// warnForeign logs the endpoints of the service of tool name that are on
// another tool's subject: they are never taken.
func (r *Registry) warnForeign(info micro.Info, name string) {
	for _, ep := range info.Endpoints {
		if other := wire.ToolFromSubject(ep.Subject); other != "" && other != name {
			r.cfg.Logger.Warn("remote tools: a service offers a tool it does not own; ignored",
				"service", info.Name, "instance", info.ID, "tool", other, "owner", wire.ToolServicePrefix+other)
		}
	}
}

// toolOf is the tool name that info, the answer of that tool's own service,
// describes: its endpoint on tah.tool.<name>.
func (r *Registry) toolOf(info micro.Info, name string) (*Tool, bool) {
	for _, ep := range info.Endpoints {
		if ep.Subject != wire.ToolSubject(name) {
			continue
		}
		t := &Tool{
			reg:        r,
			name:       name,
			service:    info.Name,
			instance:   info.ID,
			desc:       ep.Metadata[wire.MetaToolDesc],
			idempotent: ep.Metadata[wire.MetaToolIdempotent] == "true",
			exclusive:  ep.Metadata[wire.MetaToolExclusive] == "true",
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
	return nil, false
}
