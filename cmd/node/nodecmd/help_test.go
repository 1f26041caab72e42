package nodecmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelpNamesEverySectionAndValue: every section of tah-node --help has a
// heading (the agent protocol's was an empty ":"), and a boolean's or a
// duration's value is shown as such, not as TEXT.
func TestHelpNamesEverySectionAndValue(t *testing.T) {
	var out, errb bytes.Buffer
	if err := Run(context.Background(), []string{"--help"}, &out, &errb); ExitCode(err) != ExitOK {
		t.Fatalf("--help: %v", err)
	}
	help := out.String()
	for _, l := range strings.Split(help, "\n") {
		if strings.TrimSpace(l) == ":" {
			t.Errorf("a section without a heading:\n%s", help)
		}
	}
	for _, want := range []string{"\nAgent protocol:\n", "\nTracing:\n", "--agents [=BOOL] ", "--tools-builtin [=BOOL] ", "--agents-heartbeat DURATION "} {
		if !strings.Contains(help, want) {
			t.Errorf("--help does not show %q:\n%s", want, help)
		}
	}
	// The price table is the model's: under Model, as a file.
	_, model, _ := strings.Cut(help, "\nModel:\n")
	model, _, _ = strings.Cut(model, "\n\n")
	if !strings.Contains(model, "--llm-prices FILE ") || !strings.Contains(model, "[TAH_LLM_PRICES]") {
		t.Errorf("--help does not show --llm-prices FILE under Model:\n%s", help)
	}
}
