package nodecmd

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// After a crash the embedded server rebuilds its streams' index from their
// blocks and says so in warnings that read like corruption: the node logs
// them at debug; other warnings stay warnings.
func TestStaleIndexWarningsAreQuiet(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(demoted{slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelInfo})})
	log.Warn("Filestore [TAH_EVT_3] Recovering stream state from index errored: prior state file", "component", "nats")
	log.Warn("Filestore [TAH_IN] Stream state outdated, last block has additional entries, will rebuild", "component", "nats")
	log.Warn("Filestore [TAH_EVT_1] Recovering stream state from index errored: corrupt state file", "component", "nats")
	log.Info("Server is ready", "component", "nats")
	out := b.String()
	if strings.Contains(out, "prior state file") || strings.Contains(out, "will rebuild") || strings.Contains(out, "Server is ready") {
		t.Errorf("benign notices shown:\n%s", out)
	}
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "corrupt state file") {
		t.Errorf("a damaged index is no longer a warning:\n%s", out)
	}
	b.Reset()
	debug := slog.New(demoted{slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})})
	debug.Warn("Filestore [TAH_EVT_3] Recovering stream state from index errored: prior state file")
	if !strings.Contains(b.String(), "level=DEBUG") {
		t.Errorf("at debug: %q", b.String())
	}
}
