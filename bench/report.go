package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Report is everything one run measured: docs/benchmarks.json.
type Report struct {
	Machine Machine       `json:"machine"`
	Sizes   Sizes         `json:"sizes"`
	Step    []*StepResult `json:"step,omitempty"`
	Load    []*LoadResult `json:"load,omitempty"`
	Resume  *ResumeResult `json:"resume,omitempty"`
	Delta   *DeltaResult  `json:"delta,omitempty"`
	Memory  *MemoryResult `json:"memory,omitempty"`
	// SQLiteRow is the one-row transaction floor (row 1).
	SQLiteRowP50  time.Duration   `json:"sqlite_row_p50_ns"`
	SQLiteRowRate float64         `json:"sqlite_row_per_s"`
	Failover      *FailoverResult `json:"failover,omitempty"`
	Peer          *PeerResult     `json:"peer,omitempty"`
	Scale         *ScaleResult    `json:"scale,omitempty"`
	UI            *UIResult       `json:"ui,omitempty"`
	Agent         *AgentResult    `json:"agent,omitempty"`
	Tenants       *TenantsResult  `json:"tenants,omitempty"`
	Took          time.Duration   `json:"took_ns"`

	// FailoverCut is row 7's cut-off case (KillStop).
	FailoverCut *FailoverResult `json:"failover_cut,omitempty"`
}

// Sizes are the sizes this run used.
type Sizes struct {
	Quick         bool `json:"quick"`
	StepToolCalls int  `json:"step_tool_steps"`
	StepTurns     int  `json:"step_turns"`
	// StepCPUMean: row 2's CPU and allocations a step are the turns' mean
	// (false in a report of a build that took their median).
	StepCPUMean      bool          `json:"step_cpu_mean,omitempty"`
	LoadSessions     int           `json:"load_sessions"`
	LoadSteps        int           `json:"load_steps_per_turn"`
	LoadTurns        int           `json:"load_turns"`
	LoadDelay        time.Duration `json:"load_llm_delay_ns"`
	ResumeEvents     []int         `json:"resume_events"`
	ResumeOthers     int           `json:"resume_other_sessions"`
	ResumeBudget     int           `json:"resume_context_chars"`
	ResumeRepeats    int           `json:"resume_repeats"`
	DeltaTokens      int           `json:"delta_tokens"`
	DeltaPace        time.Duration `json:"delta_pace_ns"`
	MemSessions      int           `json:"memory_sessions"`
	FailoverSessions int           `json:"failover_sessions"`
	PeerSteps        int           `json:"peer_steps"`
	PeerTurns        int           `json:"peer_turns"`
	ScaleSessions    int           `json:"scale_sessions"`
	ScaleDuration    time.Duration `json:"scale_duration_ns,omitempty"`
	ScaleQuota       float64       `json:"scale_quota_cpus,omitempty"`
	ScaleCurveQuota  float64       `json:"scale_curve_quota_cpus,omitempty"`
	UISessions       int           `json:"ui_sessions,omitempty"`
	UISteps          int           `json:"ui_steps,omitempty"`
	AgentPrompts     int           `json:"agent_prompts,omitempty"`
	Tenants          int           `json:"tenants,omitempty"`
	TenantSessions   int           `json:"tenant_sessions,omitempty"`
	TenantTurns      int           `json:"tenant_turns,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPU      string `json:"cpu"`
	MemTotal string `json:"mem_total"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	Date     string `json:"date"`
	// LoadAvg is /proc/loadavg at the start and at the end of the run:
	// other work on the machine shows there.
	LoadAvgStart string `json:"loadavg_start"`
	LoadAvgEnd   string `json:"loadavg_end"`
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now().UTC().Format("2006-01-02 15:04 MST")}
	m.CPU = procField("/proc/cpuinfo", "model name")
	m.MemTotal = procField("/proc/meminfo", "MemTotal")
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	m.LoadAvgStart = loadAvg()
	return m
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "unknown"
}

// newReport is the report of a run of c, its machine and sizes filled in.
func newReport(c Config) *Report {
	return &Report{Machine: machine(), Sizes: Sizes{Quick: c.Quick, StepToolCalls: c.Steps, StepTurns: c.StepTurns, StepCPUMean: true,
		LoadSessions: c.LoadSessions, LoadSteps: c.LoadSteps, LoadTurns: c.LoadTurns, LoadDelay: c.LoadDelay,
		ResumeEvents: c.ResumeLengths, ResumeOthers: c.ResumeOthers, ResumeBudget: c.ResumeBudget, ResumeRepeats: c.ResumeRepeats,
		DeltaTokens: c.DeltaTokens, DeltaPace: c.DeltaPace, MemSessions: c.MemSessions, FailoverSessions: c.FailoverSessions,
		PeerSteps: c.PeerSteps, PeerTurns: c.PeerTurns, ScaleSessions: c.ScaleSessions, ScaleDuration: c.ScaleDuration,
		ScaleQuota: c.ScaleQuota, ScaleCurveQuota: c.ScaleCurveQuota,
		UISessions: c.UISessions, UISteps: c.UISteps, AgentPrompts: c.AgentPrompts,
		Tenants: c.Tenants, TenantSessions: c.TenantSessions, TenantTurns: c.TenantTurns}}
}

// The targets (issue 15's, and issue 9's that still hold).
const (
	// targetStepRatio: row 2 with fsync always, a step over one fenced
	// append of a record of the step's events.
	targetStepRatio = 2.5
	// targetCPUPerStep: row 2 with fsync every 2 minutes, the node
	// process's CPU per step.
	targetCPUPerStep = 150 * time.Microsecond
	// targetPeerTimes: row 8 without fsync per write, the peer's time per
	// step over TAH's.
	targetPeerTimes = 10.0
	// targetOfModel: row 3 with fsync every 2 minutes, of the model-bound
	// rate; targetOfDisk: with fsync always, of the disk-bound rate.
	targetOfModel = 0.9
	targetOfDisk  = 0.8
	// targetReadModelLag: row 3, how long the read model may run behind
	// the log ("a few seconds").
	targetReadModelLag = 5 * time.Second
	targetResume       = 2.0
)

// row is one line of the table.
type row struct {
	id, measure, setting, tah, floor, ratio, target, verdict string
}

func (r *Report) rows() []row {
	out := r.floorRows()
	out = append(out, r.stepRows()...)
	out = append(out, r.loadRows()...)
	if rs := r.Resume; rs != nil && len(rs.Lengths) > 0 {
		var ls, ts []string
		for _, l := range rs.Lengths {
			ls = append(ls, fnum(float64(l.Events)))
			ts = append(ts, fdur(l.FirstCall))
		}
		out = append(out, row{"4", fmt.Sprintf("resume, `client.Run` to the first LLM call, fresh node: %s events (among %s other sessions)", strings.Join(ls, " / "), fnum(float64(rs.Others))),
			rs.Durability, strings.Join(ts, " / "), "", fratio(rs.Ratio) + " at " + fnum(float64(rs.RatioEvents)) + " / shortest", fmt.Sprintf("≤ %s×", trimFloat(targetResume)),
			metOr(rs.Ratio <= targetResume, fmt.Sprintf("missed: %s× over", trimFloat(round1(rs.Ratio/targetResume))))})
	}
	if d := r.Delta; d != nil {
		out = append(out, row{"5", "token delta, provider to a subscriber in another process (TCP), p50 / p99", "core NATS",
			fdur(d.P50) + " / " + fdur(d.P99), fmt.Sprintf("%s / %s (raw publish, same path and pace)", fdur(d.FloorP50), fdur(d.FloorP99)),
			fratio(float64(d.P50) / float64(d.FloorP50)), "", ""})
	}
	if m := r.Memory; m != nil {
		out = append(out, row{"6", fmt.Sprintf("resident memory per active / passivated session, %s sessions", fnum(float64(m.Sessions))), "",
			fbytes(int(m.PerActive)) + " / " + fbytes(int(m.PerPassive)), fmt.Sprintf("Go heap: %s / %s", fbytes(int(m.HeapPerActive)), fbytes(int(m.HeapPerPassive))), "", "", ""})
	}
	out = append(out, r.failoverRows()...)
	out = append(out, r.peerRows()...)
	out = append(out, r.scaleRows()...)
	out = append(out, r.uiRows()...)
	out = append(out, r.agentRows()...)
	return append(out, r.tenantsRows()...)
}

// floorRows are row 1: the fenced appends of one record of one event, of
// one record of a whole step, of a step's records as TAH writes them; the
// store's apply of a step; a one-row SQLite transaction.
func (r *Report) floorRows() []row {
	var out []row
	for _, s := range r.Step {
		out = append(out,
			row{"1", fmt.Sprintf("fenced append of a record of one event (a step's events: mean %s; llm.started %s–%s)", fbytes(s.EventBytesMean), fbytes(s.LLMStartedBytesMin), fbytes(s.LLMStartedBytesMax)),
				s.Durability, "", fmt.Sprintf("p50 %s · %s/s", fdur(s.OneEventP50), fnum(s.OneEventRate)), "", "", ""},
			row{"1", fmt.Sprintf("**fenced append of one record of a whole step's %s events (%s): the physical floor of a step**", trimFloat(s.EventsPerStep), fbytes(s.StepRecordBytesMean)),
				s.Durability, "", fmt.Sprintf("p50 %s · %s/s%s", fdur(s.StepRecordP50), fnum(s.StepRecordRate), cpuFloor(s)), "", "", ""},
			row{"1", fmt.Sprintf("one step's %s records as TAH writes them (%s)", trimFloat(s.RecordsPerStep), strings.Join(s.StepRecords, " | ")),
				s.Durability, "", "p50 " + fdur(s.StepAppendsP50), "", "", ""})
	}
	if len(r.Step) > 0 {
		s := r.Step[0]
		out = append(out,
			row{"1", "store.Apply of one step's records (one SQLite transaction)", "WAL, synchronous NORMAL", "",
				fmt.Sprintf("p50 %s · %s/s", fdur(s.ApplyP50), fnum(s.ApplyRate)), "", "", ""},
			row{"1", "SQLite one-row transaction (200 B)", "WAL, synchronous NORMAL", "",
				fmt.Sprintf("p50 %s · %s/s", fdur(r.SQLiteRowP50), fnum(r.SQLiteRowRate)), "", "", ""})
	}
	return out
}

// cpuFloor is " · CPU <d>" of a step's record's append, or "" when not
// measured.
func cpuFloor(s *StepResult) string {
	if s.StepRecordCPU <= 0 {
		return ""
	}
	return " · CPU " + fdur(s.StepRecordCPU)
}

// stepRows are row 2: a step against the one append of its record (the
// target with fsync always), TAH's own time, the process's CPU per step
// (the target with fsync every 2 minutes) and the same with tracing on
// against it, and the middle of the turn.
func (r *Report) stepRows() []row {
	var out []row
	for _, s := range r.Step {
		tgt, verdict := "", ""
		if s.Sync == 0 {
			tgt = fmt.Sprintf("≤ %s×", trimFloat(targetStepRatio))
			verdict = metOr(s.Ratio <= targetStepRatio, fmt.Sprintf("missed by %.0f%%", (s.Ratio/targetStepRatio-1)*100))
		}
		out = append(out, row{"2", fmt.Sprintf("time per LLM step, one turn of %d tool steps, mock instant, noop tool", s.ToolSteps), s.Durability,
			fdur(s.PerStep), fdur(s.StepRecordP50) + " (one append of the step's record)", fratio(s.Ratio), tgt, verdict})
		own := fdur(s.Overhead)
		if s.Overhead <= 0 {
			own = "≈ 0 (within the noise)"
		}
		out = append(out, row{"2", "TAH's own time per step (less the floor of its writes and the mock)", s.Durability,
			own, fdur(s.FloorAppendPerStep) + " (its records and checkpoint put, per step)", fratio(s.RatioWritten) + " step / its writes", "", ""})
		tgt, verdict = "", ""
		if s.Sync > 0 {
			tgt = "≤ " + fdur(targetCPUPerStep)
			verdict = metOr(s.CPUPerStep <= targetCPUPerStep, fmt.Sprintf("missed: %s× over", trimFloat(round1(float64(s.CPUPerStep)/float64(targetCPUPerStep)))))
		}
		floor, ratio := "", ""
		if s.StepRecordCPU > 0 {
			floor, ratio = fdur(s.StepRecordCPU)+" (CPU of one append of the step's record: client and server)", fratio(s.CPURatio)
		}
		out = append(out, row{"2", "CPU (user + system) of the whole process per step: loop, projector, embedded server, client", s.Durability,
			fdur(s.CPUPerStep), floor, ratio, tgt, verdict})
		if s.AllocsPerStep > 0 {
			out = append(out, row{"2", "heap allocations of the whole process per step (objects · bytes), same span", s.Durability,
				fnum(s.AllocsPerStep) + " · " + fbytes(int(s.AllocBytesPerStep+0.5)), "", "", "", ""})
		}
		if s.TracedTurns > 0 {
			out = append(out, row{"2", "the same CPU with tracing on: every span exported over OTLP/HTTP (to a receiver in this process) within the turn", s.Durability,
				fdur(s.TracedCPUPerStep), fdur(s.UntracedCPUPerStep) + " (tracing off, the default, in turns alternating with these)", fratio(s.TracedCPURatio), "", ""})
		}
		out = append(out, row{"2", "from one LLM call to the next, middle of the turn (p50)", s.Durability,
			fdur(s.StepGapP50), fdur(s.StepGapFloorP50) + " (the records in between)", fratio(s.StepGapRatioP50), "", ""})
	}
	return out
}

// loadRows are row 3: steps/s against the model's and the disk's bounds,
// the added latency, the read model's lag.
func (r *Report) loadRows() []row {
	var out []row
	for _, l := range r.Load {
		tgt, verdict := fmt.Sprintf("≥ %.0f%% of the model's", targetOfModel*100), metOr(l.OfModel >= targetOfModel, fmt.Sprintf("missed by %.0f points", (targetOfModel-l.OfModel)*100))
		if l.Sync == 0 {
			tgt, verdict = fmt.Sprintf("≥ %.0f%% of the disk's", targetOfDisk*100), metOr(l.OfDisk >= targetOfDisk, fmt.Sprintf("missed by %.0f points", (targetOfDisk-l.OfDisk)*100))
		}
		out = append(out, row{"3", fmt.Sprintf("steps/s: %s sessions, %d steps a turn, model answers in %s", fnum(float64(l.Sessions)), l.StepsPerTurn, fdur(l.LLMDelay)), l.Durability,
			fnum(l.StepsPerSec) + "/s", fmt.Sprintf("model-bound %s/s; disk-bound %s/s (%s writes/s from %s writers ÷ %s writes a step)",
				fnum(l.ModelBound), fnum(l.DiskBound), fnum(l.DiskWritesPerSec), fnum(float64(l.Sessions)), trimFloat(round2(l.WritesPerStep))),
			fmt.Sprintf("%.0f%% of the model's, %.0f%% of the disk's", l.OfModel*100, l.OfDisk*100), tgt, verdict})
		out = append(out, row{"3", "added latency per step (step less the model), p50 / p99", l.Durability,
			fdur(l.AddedP50) + " / " + fdur(l.AddedP99), "", "", "", ""})
		out = append(out, row{"3", "read model behind the log when the last turn ended: records, time to catch up", l.Durability,
			fmt.Sprintf("%s records, %s", fnum(float64(l.ReadModelBehind)), fdur(l.ReadModelCatchUp)), "", "", "≤ " + fdur(targetReadModelLag),
			metOr(l.ReadModelCatchUp <= targetReadModelLag, "missed by "+fdur(l.ReadModelCatchUp-targetReadModelLag))})
	}
	return out
}

func (r *Report) failoverRows() []row {
	const what = "failover: kill -9 of an owner to its sessions going on elsewhere (three nodes)"
	f := r.Failover
	switch {
	case f == nil:
		return []row{{"7", what, "", "not run (-rows)", "", "", "", ""}}
	case f.NotMeasured != "":
		return []row{{"7", what, "", f.NotMeasured, "", "", "", ""}}
	}
	kill := "kill -9"
	if f.Kill == KillShutdown {
		kill = "kill (server shut down in process)"
	}
	setting := fmt.Sprintf("R3; NodeTTL %s, pin TTL %s, ack wait %s; %s", fdur(f.NodeTTL), fdur(f.InputPinnedTTL), fdur(f.InputAckWait), f.Durability)
	verdict := f.verdict()
	if len(f.SurvivorFences) > 0 {
		verdict += fmt.Sprintf("; the survivors fenced themselves %d times", len(f.SurvivorFences))
	}
	if len(f.Problems) > 0 {
		verdict += fmt.Sprintf("; %d correctness problem(s), see below", len(f.Problems))
	}
	runBound, idleBound := f.boundRunning(), f.boundIdle()
	return append([]row{
		{"7", fmt.Sprintf("failover: %s of an owner to the first LLM call elsewhere of its %d turns in flight, p50 / max", kill, f.Running), setting,
			fdur(f.RunningP50) + " / " + fdur(f.RunningMax), fmt.Sprintf("≤ %s (at worst: the ack wait)", fdur(runBound)),
			fratio(float64(f.RunningMax) / float64(runBound)), f.target(), verdict},
		{"7", fmt.Sprintf("failover: %s of an owner to the first LLM call elsewhere of an input sent then to one of its %d idle sessions, p50 / max", kill, f.Idle), setting,
			fdur(f.IdleP50) + " / " + fdur(f.IdleMax), fmt.Sprintf("≤ %s (the settings: NodeTTL and one check)", fdur(idleBound)),
			fratio(float64(f.IdleMax) / float64(idleBound)), "", ""},
	}, r.failoverCutRows()...)
}

func metOr(ok bool, missed string) string {
	if ok {
		return "met"
	}
	return missed
}

// Table renders the rows as a Markdown table (readable as text too).
func (r *Report) Table() string {
	var b strings.Builder
	b.WriteString("| # | measure | setting | TAH | floor / ideal | ratio | target | verdict |\n|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.rows() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", x.id, x.measure, x.setting, x.tah, x.floor, x.ratio, x.target, x.verdict)
	}
	return b.String()
}

// Write writes benchmarks.json and benchmarks.md (with table, the report's
// Table) to dir.
func (r *Report) Write(dir, table string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "benchmarks.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "benchmarks.md"), []byte(r.markdown(table)), 0o644)
}

// Rerender writes the table to stdout and benchmarks.md to dir (none when
// dir is empty) again from a run's benchmarks.json at path, for when the
// prose changed and the numbers did not.
func Rerender(path, dir string, stdout io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	table := rep.Table()
	fmt.Fprint(stdout, table)
	if dir == "" {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "benchmarks.md"), []byte(rep.markdown(table)), 0o644)
}

// Formatting.

func fdur(d time.Duration) string {
	switch a := max(d, -d); {
	case a < time.Microsecond:
		return fmt.Sprintf("%d ns", d.Nanoseconds())
	case a < time.Millisecond:
		return trimFloat(round3(float64(d)/1e3)) + " µs"
	case a < time.Second:
		return trimFloat(round3(float64(d)/1e6)) + " ms"
	}
	return trimFloat(round3(float64(d)/1e9)) + " s"
}

// round3 keeps three significant digits.
func round3(x float64) float64 {
	s := strconv.FormatFloat(x, 'g', 3, 64)
	v, _ := strconv.ParseFloat(s, 64)
	return v
}

func round1(x float64) float64 {
	if x >= 10 {
		return float64(int64(x + 0.5))
	}
	return float64(int64(x*10+0.5)) / 10
}

func trimFloat(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

func fratio(x float64) string {
	if x >= 10 {
		return fmt.Sprintf("%.0f×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}

// fnum writes n rounded, with thousands separators.
func fnum(x float64) string {
	n := int64(x + 0.5)
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func fbytes(n int) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return trimFloat(round3(float64(n)/1e3)) + " KB"
	}
	return trimFloat(round3(float64(n)/1e6)) + " MB"
}
