package bench

import "fmt"

// targetRestateRate: row 8, TAH's rate with PeerResult.Sessions sessions at
// once over Restate's, at both durability levels (issue 28 item 4); TAH
// must also take less time per step than Restate.
const targetRestateRate = 1.5

// peerRows are row 8: TAH against LangGraph.js on the same agent, each
// durability setting against its SQLite match. Without fsync per write the
// target is ten times less time a step; with it the disk sets the floor and
// row 2's ratio is the target, so the row only reports. Then TAH against
// Restate at the matching setting: per step, and the rate of many sessions
// at once.
func (r *Report) peerRows() []row {
	if r.Peer == nil {
		return nil
	}
	var out []row
	for _, p := range r.Peer.Rows {
		measure := fmt.Sprintf("time per tool step, turns of %d tool steps, model instant, noop tool: TAH against LangGraph.js 1.x + SqliteSaver", r.Peer.Steps)
		setting := fmt.Sprintf("TAH %s; SQLite WAL, synchronous %s", p.Durability, p.Synchronous)
		if p.NotRun != "" {
			out = append(out, row{"8", measure, setting, fdur(p.TAHPerStep), "peer not run: " + p.NotRun, "", "", ""})
		} else {
			times := float64(p.PeerPerStep) / float64(max(p.TAHPerStep, 1))
			tgt, verdict := "", ""
			if p.Synchronous == "NORMAL" {
				tgt = fmt.Sprintf("≥ %s× less", trimFloat(targetPeerTimes))
				verdict = metOr(times >= targetPeerTimes, fmt.Sprintf("missed: %s× less", trimFloat(round1(times))))
			}
			out = append(out, row{"8", measure, setting, fdur(p.TAHPerStep), "peer: " + fdur(p.PeerPerStep), lessOrMore(times), tgt, verdict})
		}
		out = append(out, r.restateRows(p)...)
	}
	return out
}

// restateRows are row 8's lines against Restate under one setting: the time
// per step of one session, and the rate of PeerResult.Sessions sessions at
// once.
func (r *Report) restateRows(p *PeerRow) []row {
	rs := p.Restate
	if rs == nil && p.TAHConcurrent == nil {
		return nil
	}
	setting := "TAH " + p.Durability
	if rs != nil {
		setting += "; Restate " + rs.Setting
	}
	perStep := fmt.Sprintf("time per tool step, one session, turns of %d tool steps: TAH against Restate 1.7 (a Virtual Object, a `ctx.run` per model and per tool call)", r.Peer.Steps)
	conc := fmt.Sprintf("**%d sessions at once**, %d turns of %d tool steps each: steps/s (time per step p50; CPU per step) TAH against Restate 1.7", r.Peer.Sessions, r.Peer.SessionTurns, r.Peer.Steps)
	tahConc := "not run"
	if c := p.TAHConcurrent; c != nil {
		tahConc = concurrentFigures(c)
	}
	if rs == nil || rs.NotRun != "" {
		why := "not run (-rows)"
		if rs != nil {
			why = rs.NotRun
		}
		out := []row{{"8", perStep, setting, fdur(p.TAHPerStep), "Restate not run: " + why, "", "", ""}}
		if p.TAHConcurrent != nil {
			out = append(out, row{"8", conc, setting, tahConc, "Restate not run", "", fmt.Sprintf("≥ %s×", trimFloat(targetRestateRate)), ""})
		}
		return append(out, r.floorRow(p, nil)...)
	}
	times := float64(rs.PerStep) / float64(max(p.TAHPerStep, 1))
	out := []row{{"8", perStep, setting, fdur(p.TAHPerStep), "Restate: " + fdur(rs.PerStep), lessOrMore(times), "less",
		metOr(times > 1, fmt.Sprintf("missed: %s× more", trimFloat(round1(1/max(times, 1e-9)))))}}
	if c, rc := p.TAHConcurrent, rs.Concurrent; c != nil && rc != nil {
		x := c.StepsPerSec / max(rc.StepsPerSec, 1e-9)
		verdict := metOr(x >= targetRestateRate, fmt.Sprintf("missed: %s×", trimFloat(round2(x))))
		if f := p.NATSFloor; x < targetRestateRate && f != nil && f.StepsPerSec < targetRestateRate*rc.StepsPerSec {
			verdict += fmt.Sprintf("; beyond the floor: NATS alone makes %s× Restate's rate with these appends (see the next line)",
				trimFloat(round2(f.StepsPerSec/max(rc.StepsPerSec, 1e-9))))
		}
		out = append(out, row{"8", conc, setting, tahConc, "Restate: " + concurrentFigures(rc), fratio(x), fmt.Sprintf("≥ %s×", trimFloat(targetRestateRate)), verdict})
	}
	return append(out, r.floorRow(p, rs)...)
}

// targetOfFloor: row 8, where NATS alone cannot make targetRestateRate
// times Restate's rate with the concurrent sessions' appends, TAH's rate
// over that floor (the target the floor allows).
const targetOfFloor = 0.8

// floorRow is row 8's line of the concurrent sessions against their floor,
// the same appends by NATS alone; rs is Restate's side (nil when it did not
// run), which says whether the floor sets the target.
func (r *Report) floorRow(p *PeerRow, rs *RestatePeer) []row {
	c, f := p.TAHConcurrent, p.NATSFloor
	if c == nil || f == nil {
		return nil
	}
	measure := fmt.Sprintf("%d sessions at once: TAH against the floor of its writes, the records of the same turns appended by NATS alone (%d writers at once, each record by one fenced append, to the node's server; no loop, no read model, no client)",
		r.Peer.Sessions, r.Peer.Sessions)
	x := c.StepsPerSec / max(f.StepsPerSec, 1e-9)
	tgt, verdict := "", ""
	if rs != nil && rs.Concurrent != nil && f.StepsPerSec < targetRestateRate*rs.Concurrent.StepsPerSec {
		tgt = fmt.Sprintf("≥ %s%% of it (the floor is below %s× Restate's rate)", trimFloat(targetOfFloor*100), trimFloat(targetRestateRate))
		verdict = metOr(x >= targetOfFloor, fmt.Sprintf("missed: %s%%", trimFloat(round1(x*100))))
	}
	return []row{{"8", measure, "TAH " + p.Durability, concurrentFigures(c), "NATS alone: " + concurrentFigures(f),
		fmt.Sprintf("%s%% of it", trimFloat(round1(x*100))), tgt, verdict}}
}

// concurrentFigures is a concurrent measure's cell: rate, time per step, CPU.
func concurrentFigures(c *PeerConcurrent) string {
	return fmt.Sprintf("%s steps/s (%s; CPU %s)", fnum(c.StepsPerSec), fdur(c.PerStep), fdur(c.CPUPerStep))
}

// lessOrMore says how many times less time TAH took than the peer (times
// above 1), or more.
func lessOrMore(times float64) string {
	if times >= 1 {
		return trimFloat(round1(times)) + "× less"
	}
	return trimFloat(round1(1/max(times, 1e-9))) + "× more"
}
