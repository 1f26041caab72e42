//go:build tools

package tools

import (
	_ "github.com/asynkron/protoactor-go/actor"
	_ "github.com/invopop/jsonschema"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "modernc.org/sqlite"
)
