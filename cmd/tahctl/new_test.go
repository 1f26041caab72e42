package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tah-dev/tah/wire"
)

// tahctl new refuses labels over the node's limits before it connects (no
// node runs here), saying which limit.
func TestNewChecksLabels(t *testing.T) {
	tooMany := []string{"new"}
	for i := range wire.MaxLabels + 1 {
		tooMany = append(tooMany, "--label", fmt.Sprintf("k%d=v", i))
	}
	for name, tc := range map[string]struct {
		args []string
		says string
	}{
		"a value too long": {[]string{"new", "--label", "k=" + strings.Repeat("v", wire.MaxLabelValueBytes+1)}, "the value is 257 bytes, over 256"},
		"a key too long":   {[]string{"new", "--label", strings.Repeat("k", wire.MaxLabelKeyBytes+1) + "=v"}, "the key is 64 bytes, over 63"},
		"a control char":   {[]string{"new", "--label", "k=a\x1bb"}, "not printable"},
		"too many":         {tooMany, "65 labels, over 64"},
	} {
		g, _, _ := testGlobals(nil)
		err := run(context.Background(), g, tc.args)
		if exitCode(err) != exitUsage || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v (exit %d); want a usage error saying %q", name, err, exitCode(err), tc.says)
		}
	}
}
