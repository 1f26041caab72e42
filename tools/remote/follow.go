package remote

import (
	"context"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
)

// follow refreshes the registry from Open until Close: at once, and then on
// every event that may mean a service came or went (see Registry).
func (r *Registry) follow(ctx context.Context) {
	defer r.wg.Done()
	reconnected := r.nc.StatusChanged(nats.CONNECTED)
	defer r.nc.RemoveStatusListener(reconnected)
	var periodic <-chan time.Time
	if r.cfg.RefreshEvery > 0 {
		t := time.NewTicker(r.cfg.RefreshEvery)
		defer t.Stop()
		periodic = t.C
	}
	missing := time.NewTicker(r.cfg.MissingEvery)
	defer missing.Stop()
	for {
		if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("remote tools: refresh failed", "err", err)
		}
		for again := false; !again; {
			select {
			case <-ctx.Done():
				return
			case <-r.kick:
				again = true
			case <-reconnected:
				r.cfg.Logger.Debug("remote tools: reconnected; looking for the tool services again")
				again = true
			case <-periodic:
				again = true
			case <-missing.C:
				again = r.missing()
			}
		}
	}
}

// nudge asks for a refresh soon, without waiting for it.
func (r *Registry) nudge() {
	select {
	case r.kick <- struct{}{}:
	default: // one is asked for already
	}
}

// missing reports whether a call waits for a tool, or a tool disappeared
// less than MissingFor ago; it forgets those that disappeared before.
func (r *Registry) missing() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, at := range r.gone {
		if time.Since(at) > r.cfg.MissingFor {
			delete(r.gone, name)
		}
	}
	return len(r.gone) > 0 || len(r.wanted) > 0
}

// settle makes found the registry's tools, as discovered by refresh number
// round, with those it knew whose services were asked and did not reply
// (silent: slow, not gone), and tells the waiters.
func (r *Registry) settle(round uint64, found map[string]*Tool, silent []ask) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for key, t := range r.tools {
		if _, ok := found[key]; !ok && slices.ContainsFunc(silent, t.askedBy) {
			found[key] = t // its service did not reply in time: slow, not gone
		}
	}
	for name, t := range r.tools {
		if _, ok := found[name]; !ok {
			r.gone[name] = now
			r.cfg.Logger.Info("remote tools: a tool service is gone", "tool", name, "service", t.service)
		}
	}
	for name, t := range found {
		if _, ok := r.tools[name]; !ok {
			r.cfg.Logger.Info("remote tools: a tool service is here", "tool", name, "service", t.service, "instance", t.instance)
		}
		delete(r.gone, name)
		r.seen[name] = true
	}
	r.tools = found
	r.fresh = max(r.fresh, round)
	close(r.changed)
	r.changed = make(chan struct{})
}

// ServiceWait is the longest a call waits for its tool's absent service
// (Config.ServiceWait).
func (r *Registry) ServiceWait() time.Duration { return r.cfg.ServiceWait }

// Expected reports whether a service of the tool named name may still be on
// its way, and until when a caller may wait for it: the registry does not
// list the tool and has not listed it since it opened, less than
// ServiceWait ago. The tool services that were connected to a node's
// embedded server reconnect on their own when the node restarts, and may do
// so after it started (nats.go waits two seconds between attempts by
// default): a session whose last request offered such a tool waits for it
// (WaitFor, until the time returned) rather than dropping it from its next
// request. A tool the registry listed and lost is not expected: it is
// missing (see Registry), and a call of it waits as any call does.
func (r *Registry) Expected(name string) (until time.Time, ok bool) {
	return r.expected(name)
}

// expected is Expected of a tool that any of keys names: none of them
// listed or seen.
func (r *Registry) expected(keys ...string) (until time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	until = r.opened.Add(r.cfg.ServiceWait)
	if !time.Now().Before(until) {
		return time.Time{}, false
	}
	for _, k := range keys {
		if _, listed := r.tools[k]; listed || r.seen[k] {
			return time.Time{}, false
		}
	}
	return until, true
}

// WaitFor returns nil once a discovery that started after the call finds a
// service of the tool named name, or ctx's error. While it waits the registry
// looks every MissingEvery. The caller bounds the wait with ctx (ServiceWait
// is the configured bound); cancelling ctx ends it at once.
func (r *Registry) WaitFor(ctx context.Context, name string) error {
	return r.waitFor(ctx, name)
}

// waitFor is WaitFor of a tool that any of keys names.
func (r *Registry) waitFor(ctx context.Context, keys ...string) error {
	r.mu.Lock()
	for _, k := range keys {
		r.wanted[k]++
	}
	since := r.started
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		for _, k := range keys {
			if r.wanted[k]--; r.wanted[k] <= 0 {
				delete(r.wanted, k)
			}
		}
		r.mu.Unlock()
	}()
	r.nudge()
	for {
		r.mu.Lock()
		ok := false
		for _, k := range keys {
			_, listed := r.tools[k]
			ok = ok || listed
		}
		fresh, changed := r.fresh > since, r.changed
		r.mu.Unlock()
		if ok && fresh {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
