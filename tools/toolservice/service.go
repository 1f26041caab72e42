package toolservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/telemetry"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/remote"
	"github.com/tah-dev/tah/wire"
)

// Config configures a Service. Zero values mean the defaults named.
type Config struct {
	// Version is the micro services' version, SemVer (default "1.0.0").
	Version string
	// MaxConcurrent bounds the calls running at once, over all the tools
	// (default 16). Further requests wait in NATS.
	MaxConcurrent int
	// Executor options: the default timeout, the output limit and where large
	// outputs go (see tools.Options).
	Executor tools.Options
	// Results names the bucket of stored calls; it is created if missing.
	Results remote.ResultsConfig
	// Logger receives the service's records; nil means slog.Default().
	Logger *slog.Logger
	// Namespace, when set, serves the tools as namespace Namespace's
	// (wire.ToolNamespaceGrant): each tool is named <Namespace>__<tool>,
	// its micro service is tah-tools-<Namespace>, its endpoint
	// tah.tool.<Namespace>.<tool>, and its calls are stored under the
	// namespace; a tool credential that grants the namespace serves
	// whatever tools Set adds later.
	Namespace string
	// Tenant, when set, serves the tools to that tenant's sessions alone,
	// with a tool credential of the tenant (tahctl creds add --tenant T
	// --role tool --tool NAME): each tool's micro service is
	// tah-ttool-<Tenant>__<name>, its endpoint tah.ttool.<Tenant>.<name>,
	// its cancels come on tah.ttool.<Tenant>.cancel.*, and its calls are
	// stored under t=<Tenant> without binding the bucket (such a
	// credential reads no stream's info), which a node must have made
	// (docs/protocol.md, "A tenant's tools"). Not with Namespace. Start
	// fails at once, saying so, when the credential is not one of Tenant's
	// for the tool (NATS refuses it the stored calls).
	Tenant string
	// TracerProvider makes the span of each call ("execute_tool <name>", a
	// server span, the child of the caller's span when the request carries
	// W3C trace context in its headers); nil: OpenTelemetry's global
	// provider, which records nothing unless the program set one up.
	TracerProvider trace.TracerProvider
}

// Service offers tools on NATS: one micro service per tool, named
// tah-tool-<name>, with one endpoint on tah.tool.<name> in queue group tah-tools
// (a namespace's: tah-tools-<ns>, with its endpoint on tah.tool.<ns>.<tool>).
type Service struct {
	nc      *nats.Conn
	cfg     Config
	exec    atomic.Pointer[tools.Executor] // of the tools served now (Set)
	results *remote.Results
	log     *slog.Logger

	cancelSub *nats.Subscription
	ctx       context.Context
	cancel    context.CancelFunc
	slots     chan struct{}

	mu       sync.Mutex
	closing  bool
	served   map[string]*served     // by tool name
	inflight map[string][]*call     // by call token
	early    map[string]earlyCancel // cancels of attempts not seen yet, by attempt
	wg       sync.WaitGroup
}

// served is a tool's micro service, and what it says of the tool: a tool
// that says something else is served anew (Set).
type served struct {
	svc  micro.Service
	desc string
	meta map[string]string
}

type call struct {
	session  string
	attempt  string
	cancel   context.CancelFunc
	timedOut atomic.Bool // the caller's deadline passed (a cancel with reason "timeout")
}

// Start offers ts on nc until Close. It binds to (or creates) the results bucket
// first, so it needs JetStream. It returns an error for tools with invalid or
// duplicate names or schemas, tools outside Config.Namespace, no tools (a
// namespace's service may start with none), or when NATS refuses.
func Start(ctx context.Context, nc *nats.Conn, cfg Config, ts ...tools.Tool) (*Service, error) {
	if cfg.Version == "" {
		cfg.Version = "1.0.0"
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 16
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Executor.Logger == nil {
		cfg.Executor.Logger = cfg.Logger
	}
	cfg.Results.Create = true
	if cfg.Tenant != "" {
		if err := event.ValidTenant(cfg.Tenant); err != nil {
			return nil, fmt.Errorf("toolservice: %w", err)
		}
		if cfg.Namespace != "" {
			return nil, errors.New("toolservice: a tenant's tools are served one by one, not as a namespace")
		}
		cfg.Results.Direct = true
	}
	if cfg.Namespace != "" {
		if err := wire.ValidToolNamespace(cfg.Namespace); err != nil {
			return nil, fmt.Errorf("toolservice: %w", err)
		}
	} else if len(ts) == 0 {
		return nil, errors.New("toolservice: no tools to serve")
	}
	reg, err := newRegistry(cfg, ts)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("toolservice: %w", err)
	}
	s := &Service{
		nc:       nc,
		cfg:      cfg,
		results:  remote.NewResults(js, cfg.Results),
		log:      cfg.Logger,
		slots:    make(chan struct{}, cfg.MaxConcurrent),
		served:   map[string]*served{},
		inflight: map[string][]*call{},
		early:    map[string]earlyCancel{},
	}
	// Bind now: a service that cannot store results must not take calls.
	// (A namespace's key: its credential may read no other.)
	service, tool := "", ""
	if cfg.Namespace != "" {
		service, tool = wire.ToolNamespaceService(cfg.Namespace), cfg.Namespace+wire.ToolNamespaceSep+"bind"
	} else {
		tool = ts[0].Name()
		if cfg.Tenant != "" {
			service = wire.TenantToolService(cfg.Tenant, tool)
		}
	}
	bindCtx, stopWatch := watchDenials(ctx, nc)
	_, err = s.results.GetFor(bindCtx, service, tool, "", "bind")
	denied := stopWatch()
	switch {
	case denied != nil && cfg.Tenant != "":
		return nil, fmt.Errorf("toolservice: NATS refused this credential the stored calls of tenant %s's tool %s (%v): serve it with a tool credential of tenant %s issued for it (tahctl creds add --tenant %s --role tool --tool %s), and Config.Tenant that credential's tenant",
			cfg.Tenant, tool, denied, cfg.Tenant, cfg.Tenant, tool)
	case denied != nil:
		return nil, fmt.Errorf("toolservice: NATS refused this credential the stored calls of tool %s (%v): serve it with a tool credential issued for it (tahctl creds add --role tool --tool %s; a tenant's: --tenant T, and Config.Tenant T)",
			tool, denied, tool)
	case err != nil && !errors.Is(err, remote.ErrNoResult):
		return nil, fmt.Errorf("toolservice: %w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.cancelSub, err = nc.Subscribe(s.cancelPrefix()+"*", s.onCancel); err != nil {
		s.cancel()
		return nil, fmt.Errorf("toolservice: subscribe to cancels: %w", err)
	}
	s.mu.Lock()
	err = s.apply(reg)
	s.mu.Unlock()
	if err != nil {
		s.stop()
		s.cancel()
		_ = s.cancelSub.Unsubscribe()
		return nil, err
	}
	return s, nil
}

// newRegistry checks ts as tools of one service: valid and distinct names
// and schemas, in cfg.Namespace when it is set.
func newRegistry(cfg Config, ts []tools.Tool) (*tools.Registry, error) {
	reg, err := tools.NewRegistry(ts...)
	if err != nil {
		return nil, fmt.Errorf("toolservice: %w", err)
	}
	if cfg.Namespace != "" {
		for _, t := range ts {
			if ns, _, ok := wire.SplitToolName(t.Name()); !ok || ns != cfg.Namespace {
				return nil, fmt.Errorf("toolservice: tool %s is not of the namespace %s (%s__<tool>): %w", t.Name(), cfg.Namespace, cfg.Namespace, tools.ErrInvalidName)
			}
		}
	}
	return reg, nil
}

// Set makes ts the tools served, checked as Start's: a tool not served yet
// is added, a tool served that is not in ts is withdrawn (its calls in
// flight finish), and a tool whose description or metadata (schema,
// idempotent, ...) changed is served anew, the new service added before the
// old one stops, so that its calls meet no gap. Unchanged tools keep their
// services. A tool credential names each tool of a service without a
// namespace: serve new tools with a namespace (Config.Namespace). When NATS
// refuses, part of the change may be made: the error says so, and Close
// still stops everything.
func (s *Service) Set(ts ...tools.Tool) error {
	if s.cfg.Namespace == "" && len(ts) == 0 {
		return errors.New("toolservice: no tools to serve")
	}
	reg, err := newRegistry(s.cfg, ts)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errors.New("toolservice: set: the service is closed")
	}
	return s.apply(reg)
}

// apply serves the tools of reg, and withdraws the others (see Set). It is
// called with s.mu held.
func (s *Service) apply(reg *tools.Registry) error {
	// The new tools are what calls run from now on, whichever service took
	// them (calls in flight keep the executor they started with).
	s.exec.Store(tools.NewExecutor(reg, s.cfg.Executor))
	var stale []micro.Service
	for _, name := range reg.Names() {
		t, _ := reg.Tool(name)
		meta := remote.Metadata(t)
		if old, ok := s.served[name]; ok {
			if old.desc == t.Description() && maps.Equal(old.meta, meta) {
				continue
			}
			stale = append(stale, old.svc)
		}
		svc, err := s.add(t, meta)
		if err != nil {
			return fmt.Errorf("toolservice: tool %s: %w", name, err)
		}
		s.served[name] = &served{svc: svc, desc: t.Description(), meta: meta}
	}
	for name, old := range s.served {
		if _, ok := reg.Tool(name); !ok {
			stale = append(stale, old.svc)
			delete(s.served, name)
		}
	}
	// The subscriptions reach the server before the new services stand for
	// the old ones, and before Start returns: a call made right after must
	// not meet "no responders".
	if err := s.nc.FlushTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("toolservice: %w", err)
	}
	for _, svc := range stale {
		if err := svc.Stop(); err != nil {
			s.log.Warn("toolservice: stop", "service", svc.Info().Name, "err", err)
		}
	}
	return nil
}

// add starts the micro service of t, whose endpoint metadata is meta.
func (s *Service) add(t tools.Tool, meta map[string]string) (micro.Service, error) {
	name, subject := wire.ToolServicePrefix+t.Name(), wire.ToolSubject(t.Name())
	if ns, tool, ok := wire.SplitToolName(t.Name()); ok && ns == s.cfg.Namespace {
		name, subject = wire.ToolNamespaceService(ns), wire.NamespaceToolSubject(ns, tool)
	}
	if s.cfg.Tenant != "" {
		name, subject = wire.TenantToolService(s.cfg.Tenant, t.Name()), wire.TenantToolSubject(s.cfg.Tenant, t.Name())
	}
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        name,
		Version:     s.cfg.Version,
		Description: t.Description(),
		Metadata:    map[string]string{wire.MetaToolProtocol: wire.ProtocolString},
		QueueGroup:  wire.ToolQueueGroup,
	})
	if err != nil {
		return nil, err
	}
	if err := svc.AddEndpoint(t.Name(), s.handler(t, svc),
		micro.WithEndpointSubject(subject),
		micro.WithEndpointQueueGroup(wire.ToolQueueGroup),
		micro.WithEndpointMetadata(meta)); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	return svc, nil
}

// Info returns the micro info of each service, in tool name order.
func (s *Service) Info() []micro.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]micro.Info, 0, len(s.served))
	for _, name := range slices.Sorted(maps.Keys(s.served)) {
		out = append(out, s.served[name].svc.Info())
	}
	return out
}

// Close stops taking calls, waits for the calls in flight until ctx is done,
// then cancels those left and waits for them to store and send their results.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.stop()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }() // ends with the last call, which the cancel below ends
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("toolservice: close: calls cancelled: %w", ctx.Err())
		s.cancel()
		<-done
	}
	s.cancel()
	if s.cancelSub != nil {
		_ = s.cancelSub.Unsubscribe()
	}
	return err
}

// stop stops every tool's micro service.
func (s *Service) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sv := range s.served {
		if err := sv.svc.Stop(); err != nil {
			s.log.Warn("toolservice: stop", "service", sv.svc.Info().Name, "err", err)
		}
	}
}

// Serve offers ts on nc, with the default Config, until ctx is done; then it
// gives the calls in flight 10 seconds to finish.
func Serve(ctx context.Context, nc *nats.Conn, ts ...tools.Tool) error {
	s, err := Start(ctx, nc, Config{}, ts...)
	if err != nil {
		return err
	}
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return s.Close(cctx)
}

// handler takes a request off the endpoint's subscription: it waits for a slot
// (keeping further requests in NATS) and runs the call in a goroutine that the
// service owns.
func (s *Service) handler(t tools.Tool, svc micro.Service) micro.HandlerFunc {
	return func(req micro.Request) {
		select {
		case s.slots <- struct{}{}:
		case <-s.ctx.Done():
			_ = req.Error(wire.ToolErrorStatus(event.CodeToolUnavailable), "the tool service is stopping; the call did not run", nil)
			return
		}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			<-s.slots
			_ = req.Error(wire.ToolErrorStatus(event.CodeToolUnavailable), "the tool service is stopping; the call did not run", nil)
			return
		}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() { <-s.slots }()
			s.serve(t, svc, req)
		}()
	}
}

// kvTimeout bounds each write of a stored call.
const kvTimeout = 10 * time.Second

// A call's result whose write fails is written again every storeRetryEvery
// for up to storeRetryFor: the NATS server may be restarting.
const (
	storeRetryEvery = 250 * time.Millisecond
	storeRetryFor   = 2 * time.Minute
)

// tracer makes the calls' spans.
func (s *Service) tracer() trace.Tracer {
	tp := s.cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(telemetry.InstrumentationName, trace.WithSchemaURL(telemetry.SchemaURL))
}

func (s *Service) serve(t tools.Tool, svc micro.Service, req micro.Request) {
	var in wire.ToolRequest
	if err := json.Unmarshal(req.Data(), &in); err != nil {
		s.respondError(req, "400", oneLine("malformed request: "+err.Error()), nil)
		return
	}
	h := req.Headers()
	if in.CallID == "" {
		in.CallID = h.Get(wire.HeaderCallID)
	}
	if in.Session == "" {
		in.Session = h.Get(wire.HeaderSession)
	}
	if in.Deadline.IsZero() {
		if d, err := time.Parse(time.RFC3339Nano, h.Get(wire.HeaderDeadline)); err == nil {
			in.Deadline = d
		}
	}
	if in.CallID == "" {
		s.respondError(req, "400", "malformed request: call_id is missing", nil)
		return
	}

	// The caller's trace goes on here (telemetry.Extract ignores a
	// malformed traceparent), in the service's own span.
	ctx, span := s.tracer().Start(telemetry.Extract(s.ctx, nats.Header(h)), telemetry.OperationExecuteTool+" "+t.Name(),
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(telemetry.KeyOperation.String(telemetry.OperationExecuteTool),
			telemetry.KeyToolName.String(t.Name()), telemetry.KeyToolCallID.String(in.CallID), telemetry.KeySession.String(in.Session)))
	defer span.End()
	ctx, cancel := context.WithCancel(tools.WithCall(ctx, tools.CallInfo{Session: in.Session}))
	defer cancel()
	if !in.Deadline.IsZero() {
		var dcancel context.CancelFunc
		ctx, dcancel = context.WithDeadline(ctx, in.Deadline)
		defer dcancel()
	}
	token := wire.Token(in.CallID)
	c := &call{session: in.Session, attempt: in.Attempt, cancel: cancel}
	s.mu.Lock()
	s.inflight[token] = append(s.inflight[token], c)
	if e, ok := s.early[in.Attempt]; ok && in.Attempt != "" { // the cancel overtook the call
		delete(s.early, in.Attempt)
		c.timedOut.Store(e.timeout)
		cancel()
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		list := s.inflight[token]
		for i, x := range list {
			if x == c {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(s.inflight, token)
		} else {
			s.inflight[token] = list
		}
	}()

	info := svc.Info()
	stored := wire.StoredCall{
		CallID: in.CallID, Session: in.Session, Tool: t.Name(), Attempt: in.Attempt,
		State: wire.CallRunning, Service: info.Name, Instance: info.ID, Started: time.Now().UTC(),
	}
	s.store(stored)

	res := s.exec.Load().Execute(ctx, llm.ToolCall{ID: in.CallID, Name: t.Name(), Arguments: in.Input})
	if res.Code == event.CodeCancelled && (c.timedOut.Load() || !in.Deadline.IsZero() && !time.Now().Before(in.Deadline)) {
		res = tools.Failed(event.CodeTimeout, fmt.Sprintf("Error: the call to %s ran out of time (its deadline passed).", t.Name()))
	}

	if res.IsError {
		span.SetStatus(codes.Error, res.Code)
		span.SetAttributes(telemetry.KeyErrorType.String(res.Code))
	}
	stored.State, stored.Finished, stored.Result = wire.CallDone, time.Now().UTC(), &res
	s.store(stored) // before the reply: a caller that lost the reply finds it

	body, err := json.Marshal(res)
	if err != nil {
		s.respondError(req, "500", "cannot encode the result: "+err.Error(), nil)
		return
	}
	if res.IsError {
		err = s.respondMsg(req, body, wire.ToolErrorStatus(res.Code), oneLine(res.Output))
	} else {
		err = s.respondMsg(req, body, "", "")
	}
	if err != nil {
		s.log.Warn("toolservice: reply failed; the result is stored", "tool", t.Name(), "call", in.CallID, "err", err)
	}
}

// respondMsg publishes the reply to req itself: micro's Request may not be used
// once its handler has returned (it reads the request's state then), and calls
// are answered from their own goroutines. A failure carries micro's error
// headers, as req.Error would set them.
func (s *Service) respondMsg(req micro.Request, body []byte, status, desc string) error {
	m := nats.NewMsg(req.Reply())
	m.Data = body
	if status != "" {
		m.Header.Set(micro.ErrorCodeHeader, status)
		m.Header.Set(micro.ErrorHeader, desc)
	}
	return s.nc.PublishMsg(m)
}

func (s *Service) respondError(req micro.Request, status, desc string, body []byte) {
	if err := s.respondMsg(req, body, status, desc); err != nil {
		s.log.Warn("toolservice: reply failed", "err", err)
	}
}

func (s *Service) store(st wire.StoredCall) {
	deadline := time.Now().Add(storeRetryFor)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
		err := s.results.Put(ctx, st)
		cancel()
		if err == nil {
			return
		}
		// A result is what a node that lost the reply (its NATS server
		// restarting, say) finds: keep trying while the server is away.
		if st.State != wire.CallDone || time.Now().After(deadline) {
			s.log.Error("toolservice: storing the call failed", "tool", st.Tool, "call", st.CallID, "state", st.State, "attempts", attempt, "err", err)
			return
		}
		time.Sleep(storeRetryEvery)
	}
}

// cancelPrefix starts the subjects of the cancels of the calls served: a
// tenant's, or every tenant's tools'.
func (s *Service) cancelPrefix() string {
	if s.cfg.Tenant != "" {
		return wire.TenantToolCancelPrefix(s.cfg.Tenant)
	}
	return wire.ToolCancelPrefix
}

// onCancel cancels the calls a CancelNotice names.
func (s *Service) onCancel(m *nats.Msg) {
	token := strings.TrimPrefix(m.Subject, s.cancelPrefix())
	var n wire.ToolCancel
	_ = json.Unmarshal(m.Data, &n) // an empty or odd body cancels by call id alone
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	for _, c := range s.inflight[token] {
		if (n.Session == "" || n.Session == c.session) && (n.Attempt == "" || n.Attempt == c.attempt) {
			if n.Reason == wire.CancelReasonTimeout {
				c.timedOut.Store(true)
			}
			c.cancel()
			found = true
		}
	}
	if !found && n.Attempt != "" {
		now := time.Now()
		for a, e := range s.early {
			if now.Sub(e.at) > earlyCancelTTL {
				delete(s.early, a)
			}
		}
		if len(s.early) < maxEarlyCancels {
			s.early[n.Attempt] = earlyCancel{at: now, timeout: n.Reason == wire.CancelReasonTimeout}
		}
	}
}

// earlyCancel is a cancel that arrived before its call: a cancel can overtake a
// request that waits for a slot.
type earlyCancel struct {
	at      time.Time
	timeout bool
}

const (
	earlyCancelTTL  = time.Minute
	maxEarlyCancels = 10000
)

// oneLine makes s fit a NATS header: one line, at most 512 bytes.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 512 {
		cut := 509
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	if s == "" {
		s = "the call failed"
	}
	return s
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// watchDenials returns a context of ctx that ends as soon as NATS refuses a
// publish of nc's (a permissions violation, which the server reports only
// on the connection, leaving the request unanswered until its deadline),
// and the function that stops watching and returns that refusal, if any. A
// refusal older than the watch is not taken for one.
func watchDenials(ctx context.Context, nc *nats.Conn) (context.Context, func() error) {
	ctx, cancel := context.WithCancelCause(ctx)
	before := nc.LastError()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := nc.LastError(); err != nil && err != before && errors.Is(err, nats.ErrPermissionViolation) {
					cancel(err)
					return
				}
			}
		}
	}()
	return ctx, func() error {
		close(done)
		<-stopped
		cause := context.Cause(ctx)
		cancel(nil)
		if errors.Is(cause, nats.ErrPermissionViolation) {
			return cause
		}
		return nil
	}
}
