package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tah-dev/tah/actors/toolrunner"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// Metrics are the node's Prometheus metrics: what this node did (turns it ran,
// LLM calls it made, tool calls it executed), not what the whole cluster did,
// so that summing over nodes counts every step once.
//
//	tah_turns_total{status}                    turns (and resumes) that ended here: completed, failed, cancelled
//	tah_turn_duration_seconds{status}          how long they ran on this node
//	tah_inputs_total{command}                  inputs handed to session actors: run, resume, cancel, compact
//	tah_inputs_rejected_total                  inputs refused (unknown session, ...)
//	tah_steps_total{kind}                      steps executed: llm, tool
//	tah_llm_request_duration_seconds{provider,outcome}   one LLM call; outcome ok, error, cancelled
//	tah_llm_tokens_total{provider,kind}        tokens: input, output, cache_read
//	tah_tool_duration_seconds{tool,outcome}    one tool call; outcome ok, error, cancelled
//	tah_errors_total{kind}                     llm, tool, turn, input
//	tah_sessions_active                        session actors alive on this node
//	tah_claim_notices_total{direction}         claim notices sent to a session's previous owner, and received
//	tah_read_model_position                    the last log sequence applied to the read model (0 on a worker)
//	tah_read_model_problems_total              events stored but not folded into the read model
//	tah_read_model_rebuilds_total              read models set aside (damaged, unwritable) and rebuilt from the log
//	tah_jetstream_restarts_total               times the embedded server's JetStream was started again after a write failure
//	gen_ai_client_token_usage{...}             GenAI semantic conventions: tokens of one LLM call, by gen_ai_token_type
//	gen_ai_client_operation_duration_seconds{...}  GenAI semantic conventions: one LLM call, error_type set on a failure
//
// plus the Go runtime's and the process's collectors.
type Metrics struct {
	reg           *prometheus.Registry
	turns         *prometheus.CounterVec
	turnDuration  *prometheus.HistogramVec
	inputs        *prometheus.CounterVec
	inputsRefused prometheus.Counter
	steps         *prometheus.CounterVec
	llmDuration   *prometheus.HistogramVec
	tokens        *prometheus.CounterVec
	toolDuration  *prometheus.HistogramVec
	errors        *prometheus.CounterVec
	claimNotices  *prometheus.CounterVec
	// The GenAI semantic conventions' client metrics, as Prometheus names
	// them (gen_ai.client.token.usage, gen_ai.client.operation.duration).
	genaiTokens   *prometheus.HistogramVec
	genaiDuration *prometheus.HistogramVec
}

func newMetrics(n *Node) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tah_turns_total",
			Help: "Turns (runs and resumes) that ended on this node, by how they ended."}, []string{"status"}),
		turnDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tah_turn_duration_seconds",
			Help:    "How long a turn ran on this node, from its input to its end.",
			Buckets: []float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900}}, []string{"status"}),
		inputs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tah_inputs_total",
			Help: "Inputs handed to session actors on this node, by command."}, []string{"command"}),
		inputsRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "tah_inputs_rejected_total",
			Help: "Inputs this node refused (an unknown session, a command it could not deliver)."}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tah_steps_total",
			Help: "Steps executed on this node: LLM calls and tool calls."}, []string{"kind"}),
		llmDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tah_llm_request_duration_seconds",
			Help:    "Latency of one LLM call, streamed answer included.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}}, []string{"provider", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tah_llm_tokens_total",
			Help: "Tokens the provider reported, by kind: input, output, cache_read."}, []string{"provider", "kind"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tah_tool_duration_seconds",
			Help:    "Latency of one tool call.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 120}}, []string{"tool", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tah_errors_total",
			Help: "Failures on this node: llm (a failed call), tool (a failed result), turn (a failed turn), input (a refused input)."},
			[]string{"kind"}),
		claimNotices: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tah_claim_notices_total",
			Help: "Claim notices (wire.ClaimNotice): sent to the previous owner of a session this node claimed, and received from a node that claimed one of this node's."},
			[]string{"direction"}),
		genaiTokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gen_ai_client_token_usage",
			Help: "GenAI semantic conventions: tokens of one LLM call, by token type (input, output).",
			// The conventions' advised boundaries.
			Buckets: []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}},
			[]string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "gen_ai_response_model", "gen_ai_token_type"}),
		genaiDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gen_ai_client_operation_duration_seconds",
			Help:    "GenAI semantic conventions: duration of one LLM call; error_type is set when it failed.",
			Buckets: []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}},
			[]string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "gen_ai_response_model", "error_type"}),
	}
	m.reg.MustRegister(m.turns, m.turnDuration, m.inputs, m.inputsRefused, m.steps, m.llmDuration, m.tokens,
		m.toolDuration, m.errors, m.claimNotices, m.genaiTokens, m.genaiDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tah_sessions_active", Help: "Session actors alive on this node."},
			func() float64 {
				if n.sessions == nil {
					return 0
				}
				return float64(n.sessions.Active())
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tah_partitions_owned", Help: "Input partitions this node pulls: its share of the sessions."},
			func() float64 {
				if n.inputs == nil {
					return 0
				}
				return float64(len(n.inputs.Partitions()))
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tah_cluster_nodes", Help: "Nodes this node hears of, itself included unless fenced."},
			func() float64 {
				if n.cluster == nil {
					return 0
				}
				return float64(len(n.cluster.live()))
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tah_node_fenced_total", Help: "Times this node took itself for cut off and stopped its sessions."},
			func() float64 {
				if n.cluster == nil {
					return 0
				}
				return float64(n.cluster.fences.Load())
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tah_read_model_position", Help: "The last log sequences applied to the read model, summed over the log's shards: the records applied."},
			func() float64 {
				if n.projector() == nil {
					return 0
				}
				var sum uint64
				for _, seq := range n.projector().Positions() {
					sum += seq
				}
				return float64(sum)
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tah_read_model_problems_total", Help: "Events stored but not folded into the read model."},
			func() float64 {
				if n.projector() == nil {
					return 0
				}
				return float64(n.projector().Problems())
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tah_read_model_rebuilds_total", Help: "Read models set aside (damaged, or no longer writable) and rebuilt from the log."},
			func() float64 {
				if n.projector() == nil {
					return 0
				}
				return float64(n.projector().Rebuilds())
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tah_jetstream_restarts_total", Help: "Times the embedded NATS server's JetStream was started again after its store failed a write (a full disk)."},
			func() float64 {
				if n.bus == nil {
					return 0
				}
				return float64(n.bus.StoreRestarts())
			}),
	)
	// The label values known in advance, so that a dashboard sees zeros rather
	// than nothing before the first turn.
	for _, s := range []projection.Status{projection.StatusCompleted, projection.StatusFailed, projection.StatusCancelled} {
		m.turns.WithLabelValues(string(s))
	}
	for _, k := range []string{"llm", "tool"} {
		m.steps.WithLabelValues(k)
	}
	for _, k := range []string{"llm", "tool", "turn", "input"} {
		m.errors.WithLabelValues(k)
	}
	return m
}

// Registry is the Prometheus registry of the node's metrics.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// turnEnded records the end of a run or resume on this node.
func (m *Metrics) turnEnded(status projection.Status, d time.Duration) {
	switch status {
	case projection.StatusCompleted, projection.StatusFailed, projection.StatusCancelled:
	default:
		return // still active: not an end
	}
	m.turns.WithLabelValues(string(status)).Inc()
	m.turnDuration.WithLabelValues(string(status)).Observe(d.Seconds())
	if status == projection.StatusFailed {
		m.errors.WithLabelValues("turn").Inc()
	}
}

// toolCall records a call the tool runner ran: the session actors' tool
// runner calls it (session.ToolConfig.Observe).
func (m *Metrics) toolCall(r toolrunner.CallResult) {
	m.steps.WithLabelValues("tool").Inc()
	outcome := "ok"
	switch {
	case r.Result.Code == event.CodeCancelled:
		outcome = "cancelled"
	case r.Result.IsError:
		outcome = "error"
		m.errors.WithLabelValues("tool").Inc()
	}
	m.toolDuration.WithLabelValues(r.Call.Name, outcome).Observe(r.Duration.Seconds())
}

func (m *Metrics) llmCall(provider, model string, resp llm.Response, err error, d time.Duration) {
	m.steps.WithLabelValues("llm").Inc()
	outcome := "ok"
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		outcome = "cancelled"
	case err != nil:
		outcome = "error"
		m.errors.WithLabelValues("llm").Inc()
	}
	m.llmDuration.WithLabelValues(provider, outcome).Observe(d.Seconds())
	errorType := ""
	if err != nil {
		errorType = outcome // cancelled or error: a low-cardinality kind, never the message
	}
	m.genaiDuration.WithLabelValues("chat", provider, model, resp.Model, errorType).Observe(d.Seconds())
	if err == nil {
		m.genaiTokens.WithLabelValues("chat", provider, model, resp.Model, "input").Observe(float64(resp.Usage.InputTokens))
		m.genaiTokens.WithLabelValues("chat", provider, model, resp.Model, "output").Observe(float64(resp.Usage.OutputTokens))
		u := resp.Usage
		m.tokens.WithLabelValues(provider, "input").Add(float64(u.InputTokens))
		m.tokens.WithLabelValues(provider, "output").Add(float64(u.OutputTokens))
		if u.CacheReadTokens > 0 {
			m.tokens.WithLabelValues(provider, "cache_read").Add(float64(u.CacheReadTokens))
		}
	}
}

// measured wraps a provider to record every call in m. It keeps the
// provider's streaming ability: a Streamer stays a Streamer.
func measured(p llm.Provider, m *Metrics) llm.Provider {
	if s, ok := p.(llm.Streamer); ok {
		return &measuredStreamer{measuredProvider{p: p, m: m}, s}
	}
	return &measuredProvider{p: p, m: m}
}

type measuredProvider struct {
	p llm.Provider
	m *Metrics
}

var (
	_ llm.Provider = (*measuredProvider)(nil)
	_ llm.Streamer = (*measuredStreamer)(nil)
)

func (p *measuredProvider) Name() string { return p.p.Name() }

func (p *measuredProvider) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	start := time.Now()
	resp, err := p.p.Generate(ctx, req)
	p.m.llmCall(p.p.Name(), req.Model, resp, err, time.Since(start))
	return resp, err
}

type measuredStreamer struct {
	measuredProvider
	s llm.Streamer
}

func (p *measuredStreamer) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	start := time.Now()
	resp, err := p.s.Stream(ctx, req, onDelta)
	p.m.llmCall(p.s.Name(), req.Model, resp, err, time.Since(start))
	return resp, err
}

// Health reports whether the node can serve: its NATS connections are up,
// JetStream answers, its embedded server's JetStream store can write
// (bus.Bus.StoreErr: after a write failed, until the disk takes writes again
// and JetStream has started again), and its read model follows the log
// (Projector.Err: not while a batch fails, or while a damaged one is set
// aside). It is what /healthz checks.
func (n *Node) Health(ctx context.Context) error {
	if n.bus == nil {
		return errors.New("not started")
	}
	if err := n.bus.ConnsDown(); err != nil {
		return err
	}
	if err := n.bus.StoreErr(); err != nil {
		return err
	}
	if n.projector() != nil {
		if err := n.projector().Err(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := n.bus.JetStream().AccountInfo(ctx); err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	return nil
}

// HealthHandler serves /healthz: 200 and {"status":"ok",...} when Health
// passes, 503 and {"status":"unavailable","error":...} when it does not.
func (n *Node) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := map[string]any{"status": "ok", "node": n.opts.Session.Node, "nats": n.bus.ClientURL()}
		code := http.StatusOK
		if err := n.Health(r.Context()); err != nil {
			body["status"], body["error"] = "unavailable", err.Error()
			code = http.StatusServiceUnavailable
		}
		if n.projector() != nil {
			body["read_model_positions"] = n.projector().Positions()
		} else if n.opts.Worker {
			body["worker"] = true // no read model here, by design
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
}
