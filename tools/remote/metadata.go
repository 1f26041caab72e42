package remote

import (
	"strconv"

	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// Metadata returns the endpoint metadata that describes t.
func Metadata(t tools.Tool) map[string]string {
	m := map[string]string{
		wire.MetaToolDesc:       t.Description(),
		wire.MetaToolSchema:     string(tools.SchemaOf(t)),
		wire.MetaToolIdempotent: strconv.FormatBool(tools.IsIdempotent(t)),
		wire.MetaToolExclusive:  strconv.FormatBool(tools.IsExclusive(t)),
	}
	if tools.AsksApproval(t) {
		m[wire.MetaToolApproval] = "always"
	}
	if d := tools.TimeoutOf(t, 0); d > 0 {
		m[wire.MetaToolTimeoutMS] = strconv.FormatInt(d.Milliseconds(), 10)
	}
	return m
}
