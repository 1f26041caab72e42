package main

import (
	"strings"
	"testing"

	"github.com/tah-dev/tah/projection"
)

// show says where a session's log stopped being foldable, and what to do.
func TestShowFault(t *testing.T) {
	var b strings.Builder
	showFault(&b, style{}, "s_1", &projection.Fault{Code: projection.FaultCorruptLog, Seq: 118, Reason: "not JSON"})
	for _, want := range []string{"Failed: log corrupt at seq 118: not JSON [corrupt_log]", "tahctl fork s_1 [--turns N]"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("corrupt: %q does not say %q", b.String(), want)
		}
	}
	b.Reset()
	showFault(&b, style{}, "s_1", &projection.Fault{Code: projection.FaultNeedsNewerNode, Seq: 7, Reason: "version 3"})
	if !strings.Contains(b.String(), "Needs a newer node: the log at seq 7") || !strings.Contains(b.String(), "upgrade") {
		t.Errorf("newer: %q", b.String())
	}
}
