package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// /dev/null is a character device but no terminal: a command whose stdin is
// /dev/null must never take it for a person who answers.
func TestDevNullIsNoTerminal(t *testing.T) {
	f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Fatalf("%s taken for a terminal: send would ask it, read its end and deny the call", os.DevNull)
	}
}

// The end of input is never a decision: ask returns errNoAnswer and decides
// nothing, whether it ends at once, after an unknown answer, or before the
// reason of a denial or the edited arguments.
func TestAskDecidesNothingAtEndOfInput(t *testing.T) {
	for _, in := range []string{"", "maybe\n", "\n\n", "n\n", "e\n"} {
		var errb strings.Builder
		w := &watch{g: &globals{stdin: strings.NewReader(in), stderr: &errb}, sid: "s_x"}
		// w.c is nil: a decision would panic in decide, so reaching it fails.
		if err := w.ask(context.Background(), "c1"); !errors.Is(err, errNoAnswer) {
			t.Errorf("input %q: ask returned %v, want errNoAnswer", in, err)
		}
	}
}
