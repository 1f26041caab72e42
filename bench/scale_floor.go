package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/wire"
)

// Row 9's floor at R3 (Config.ScaleFloor): what the NATS servers alone allow
// in the same quotas. The nodes are tah-node processes in their cgroups as
// in the row's clusters, every one a worker (no read model, so no
// projector), running no session but the probe's: their embedded servers,
// R3, are what the quotas hold. The records of one turn of the row (a tool
// step and a final step, learnt from a probe session's second turn: a
// turn's records as the row writes them, in its sizes) are appended by
// writers in this process, outside the quotas, each record by one fenced
// append of its own session (bus.SessionWriter, as a node appends), as many
// writers as the row has sessions, spread over the servers as the row's
// sessions are over the nodes, each appending back to back: the steps/s the
// servers allow is the floor of the row's rate at R3, whatever TAH does on
// top (its inputs in TAH_IN, the checkpoints, the read model's reads are
// not in it, so the true floor is lower).

// floorProbe is the session whose turns give the floor its records.
const floorProbe = "s_floorprobe"

// floorSid is floor writer i's session: as long as the row's session ids, so
// that every subject and message has the same size.
func floorSid(i int) string { return fmt.Sprintf("s_floor%05d", i) }

// floorRecords runs two turns of the probe session and returns the records
// of the second (a turn of the row as the nodes write it, claim and
// creation left out), each its events, in order.
func (s *scaleScenario) floorRecords(ctx context.Context) ([][]event.Event, error) {
	cctx, cancel := context.WithTimeout(ctx, clientTimeout)
	defer cancel()
	if _, err := s.cls[0].Create(cctx, wire.CreateRequest{Session: floorProbe}); err != nil {
		return nil, fmt.Errorf("floor probe: %w", err)
	}
	for k := range 2 {
		if _, _, err := runTurn(ctx, s.cls[0], floorProbe, fmt.Sprintf("turn %d", k)); err != nil {
			return nil, fmt.Errorf("floor probe, turn %d: %w", k, err)
		}
	}
	evs, err := readLog(ctx, s.cls[0], floorProbe, 0)
	if err != nil {
		return nil, err
	}
	return secondTurnRecords(evs)
}

// secondTurnRecords groups the events of the log evs from its second
// turn.started on into records (the events of one stream sequence).
func secondTurnRecords(evs []event.Event) ([][]event.Event, error) {
	turns := 0
	var out [][]event.Event
	for _, e := range evs {
		if e.Type == event.TurnStarted {
			turns++
		}
		if turns < 2 {
			continue
		}
		if n := len(out); n > 0 && out[n-1][0].Seq == e.Seq {
			out[n-1] = append(out[n-1], e)
			continue
		}
		out = append(out, []event.Event{e})
	}
	if len(out) == 0 {
		return nil, errors.New("floor probe: no second turn in its log")
	}
	return out, nil
}

// floorBuses opens a client bus on each node's server, as the row's nodes
// append to their own.
func (s *scaleScenario) floorBuses(ctx context.Context) ([]*bus.Bus, error) {
	l := s.c.Layout()
	var out []*bus.Bus
	for i := range s.spec.nodes {
		bc := node.BusConfig(s.c.Config(i))
		bc.URL, bc.NoSetup, bc.Name, bc.CredsFile = l.Slots[i].URL(), true, "tah-bench floor", l.Creds
		b, err := bus.Open(ctx, bc)
		if err != nil {
			closeBuses(out)
			return nil, fmt.Errorf("floor bus on %s: %w", s.c.ID(i), err)
		}
		out = append(out, b)
	}
	return out, nil
}

func closeBuses(bs []*bus.Bus) {
	for _, b := range bs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = b.Close(ctx)
		cancel()
	}
}

// measureFloor appends the turn's records from every writer back to back;
// after a ramp, the window: the records appended in it make the steps/s
// (two steps a turn), and each node's CPU over them its CPU per step.
func (s *scaleScenario) measureFloor(ctx context.Context, run *ScaleRun) error {
	recs, err := s.floorRecords(ctx)
	if err != nil {
		return err
	}
	for _, r := range recs {
		run.FloorRecords = append(run.FloorRecords, FloorRecord{Events: recordName(r), Bytes: recordBytes(r)})
	}
	bs, err := s.floorBuses(ctx)
	if err != nil {
		return err
	}
	defer closeBuses(bs)
	pids, err := s.pids()
	if err != nil {
		return err
	}
	var appended, failed atomic.Int64
	var firstFailure atomic.Value
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range s.cfg.ScaleSessions {
		wg.Go(func() {
			// A writer whose append failed is broken (its outcome unknown):
			// the writer goes on as a session of its own.
			for gen := 0; lctx.Err() == nil; gen++ {
				sid := floorSid(i)
				if gen > 0 {
					sid = fmt.Sprintf("%s_%d", sid, gen)
				}
				err := floorWrite(lctx, bs[i%len(bs)], sid, recs, &appended)
				if err != nil && lctx.Err() == nil {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	ramp := min(5*time.Second, s.cfg.ScaleDuration/4)
	time.Sleep(ramp)
	snap0, n0, cpu0, t0 := s.snap(pids), appended.Load(), cpuTime(), time.Now()
	select {
	case <-time.After(s.cfg.ScaleDuration):
	case <-ctx.Done():
	}
	snap1, n1, cpu1, t1 := s.snap(pids), appended.Load(), cpuTime(), time.Now()
	run.LoadAvg = loadAvg()
	run.Placement = s.placement()
	cancel()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	run.Window = t1.Sub(t0)
	// A turn is two steps: its records over two make a step.
	run.Steps = (n1 - n0) * 2 / int64(len(recs))
	run.StepsPerSec = float64(run.Steps) / run.Window.Seconds()
	run.Failed = failed.Load()
	if f, ok := firstFailure.Load().(string); ok {
		run.FirstFailure = f
	}
	run.ClientCPUs = float64(cpu1-cpu0) / float64(run.Window)
	var total time.Duration
	for i := range s.spec.nodes {
		nd := ScaleNode{ID: s.c.ID(i), CPU: snap1[i].cpu - snap0[i].cpu, Throttled: snap1[i].throttled - snap0[i].throttled}
		total += nd.CPU
		if run.Steps > 0 {
			nd.CPUPerStep = nd.CPU / time.Duration(run.Steps)
		}
		nd.Busy = float64(nd.CPU) / float64(run.Window)
		for st, at := range run.Placement {
			if at == nd.ID {
				nd.Streams = append(nd.Streams, st)
			}
		}
		run.NodeStats = append(run.NodeStats, nd)
	}
	if run.Steps > 0 {
		run.CPUPerStep = total / time.Duration(run.Steps)
		run.CPUBound = float64(run.Nodes) * run.Quota / run.CPUPerStep.Seconds()
	}
	return nil
}

// floorWrite appends recs again and again as session sid through b, each
// record by one fenced append, counting them in appended, until ctx is done
// or an append fails.
func floorWrite(ctx context.Context, b *bus.Bus, sid string, recs [][]event.Event, appended *atomic.Int64) error {
	w, err := b.Writer(sid, 1, 0)
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		for _, r := range recs {
			evs := make([]event.Event, len(r))
			for j, e := range r {
				e.Session, e.Seq, e.Index, e.Epoch = sid, 0, 0, 0
				evs[j] = e
			}
			if _, err := w.Append(ctx, evs...); err != nil {
				return err
			}
			appended.Add(1)
		}
	}
	return nil
}
