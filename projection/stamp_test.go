package projection

import (
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// TestStampIsFoldingTheRecord: for every recorded log cut into records of
// random sizes, folding each record's events but the last without a
// sequence (staged), the last with it, then stamping, gives the state that
// folding the records gives.
func TestStampIsFoldingTheRecord(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no recorded logs")
	}
	for _, f := range files {
		evs := readLog(t, f)
		for trial := range 20 {
			rng := rand.New(rand.NewPCG(uint64(trial), 7))
			var whole, staged State
			seq := uint64(0)
			for i := 0; i < len(evs); {
				n := 1 + rng.IntN(4)
				n = min(n, len(evs)-i)
				seq += uint64(1 + rng.IntN(3))
				rec := evs[i : i+n]
				for k, e := range rec {
					e.Seq, e.Index = seq, k
					_ = Apply(&whole, e)
					if k < n-1 {
						e.Seq, e.Index = 0, 0
					}
					_ = Apply(&staged, e)
				}
				Stamp(&staged, seq)
				i += n
				// The writer slims its state between turns (its
				// checkpoint): Stamp looks again at every step then.
				if !whole.Status.Active() && rng.IntN(2) == 0 {
					whole.Slim()
					staged.Slim()
				}
			}
			a, _ := json.Marshal(whole)
			b, _ := json.Marshal(staged)
			if string(a) != string(b) {
				t.Fatalf("%s (trial %d): staged and stamped differs from folded whole:\n%s\n%s", f, trial, a, b)
			}
		}
	}
}
