// Command tah-node runs a TAH node (build it as bin/tah-node: a binary named
// "node" would shadow Node.js). `tah-node --help` lists its settings; with none
// it keeps its data in .tah, embeds NATS on 127.0.0.1:4222 and answers with the
// mock model in demo mode. The work is done by cmd/node/nodecmd.
package main

import (
	"context"
	"os"

	"github.com/tah-dev/tah/cmd/node/nodecmd"
)

func main() {
	err := nodecmd.Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	nodecmd.Report(os.Stderr, err)
	os.Exit(nodecmd.ExitCode(err))
}
