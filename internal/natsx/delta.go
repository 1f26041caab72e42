package natsx

import (
	"encoding/json"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/tah-dev/tah/wire"
)

// Delta is a token delta as a subscriber receives it: the body and what its
// headers say.
type Delta struct {
	Session string
	// Epoch is the ownership epoch of the writer that published it.
	Epoch uint64
	// Seq numbers the deltas of one epoch from 1.
	Seq uint64
	wire.Delta
}

// DeltaFilter reads the deltas of one session in the order they arrive and
// drops the stale ones: a delta of an epoch lower than the highest seen comes
// from a writer that lost ownership. It is not safe for concurrent use: one
// subscription's callback (or goroutine) owns it.
type DeltaFilter struct {
	Session string
	highest uint64
}

// Accept returns the delta m carries and true, or false for a stale delta or
// a message that is not one (no epoch header, a body that is not JSON).
func (f *DeltaFilter) Accept(m *nats.Msg) (Delta, bool) {
	epoch, err := strconv.ParseUint(m.Header.Get(wire.HeaderEpoch), 10, 64)
	if err != nil || epoch < f.highest {
		return Delta{}, false
	}
	var d wire.Delta
	if json.Unmarshal(m.Data, &d) != nil {
		return Delta{}, false
	}
	f.highest = epoch
	seq, _ := strconv.ParseUint(m.Header.Get(wire.HeaderDeltaSeq), 10, 64)
	return Delta{Session: f.Session, Epoch: epoch, Seq: seq, Delta: d}, true
}
