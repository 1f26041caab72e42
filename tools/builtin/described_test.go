package builtin_test

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/builtin"
)

// TestDescriptionFollowsLimits: what a tool tells the model is made once per
// limits, and tools of other limits (or limits changed) are described by
// their own, from many goroutines at once.
func TestDescriptionFollowsLimits(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			lim := builtin.Limits{MaxLines: 100 + i, MaxEntries: 200 + i, MaxWriteBytes: 300 + i}
			for tool, n := range map[tools.Tool]int{
				&builtin.ReadFileTool{Limits: lim}:  lim.MaxLines,
				&builtin.ListFilesTool{Limits: lim}: lim.MaxEntries,
				&builtin.WriteFileTool{Limits: lim}: lim.MaxWriteBytes,
			} {
				for range 20 {
					if s := string(tools.SchemaOf(tool)); !strings.Contains(s, strconv.Itoa(n)) {
						t.Errorf("%s with limits %+v: %s", tool.Name(), lim, s)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	r := &builtin.ReadFileTool{}
	before := tools.SchemaOf(r)
	r.Limits.MaxBytes = 12345
	after := tools.SchemaOf(r)
	if bytes.Equal(before, after) || !strings.Contains(string(after), "12345") || !strings.Contains(r.Description(), "12345") {
		t.Fatalf("limits changed, schema not:\n%s\n%s", before, after)
	}
	if !bytes.Equal(tools.SchemaOf(&builtin.ReadFileTool{}), before) {
		t.Fatal("the default limits' schema changed")
	}
}

// BenchmarkCatalogSchemas: the catalog's schemas, asked for at every step.
func BenchmarkCatalogSchemas(b *testing.B) {
	root := b.TempDir()
	reg := tools.MustRegistry(builtin.ReadFile(root), builtin.ListFiles(root), builtin.WriteFile(root, nil))
	b.ReportAllocs()
	for b.Loop() {
		if len(reg.Schemas()) != 3 {
			b.Fatal("schemas")
		}
	}
}
