package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/wire"
)

const credsHelp = `Issues a NATS credential of a role and writes it to NAME.creds (mode 0600), a
file that tahctl --creds, the Go client, nats.js and nats --creds take as it
is. The roles (docs/security.md says what each may do):
  client    send inputs and API requests, read events and deltas
  observer  read only: the API's reads, events, deltas
  tool      serve the tools named by --tool (repeat it, or comma-separate)
  admin     a client that may also issue credentials
It signs with the trust material of the node's data directory: run it on the
node's machine (tahctl finds .tah, or give --data-dir).`

// toolNames is a repeatable, comma-separated --tool.
type toolNames []string

func (t *toolNames) String() string { return strings.Join(*t, ",") }
func (t *toolNames) Set(v string) error {
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			*t = append(*t, n)
		}
	}
	return nil
}

// runCreds is `tahctl creds add --role ROLE [--tool NAME]... NAME`.
func runCreds(_ context.Context, g *globals, args []string) error {
	if len(args) == 0 || args[0] != "add" {
		return usageError("tahctl creds add --role client NAME", "creds: the subcommand is add")
	}
	fset := g.flags("creds add", "--role ROLE [--tool NAME]... NAME", credsHelp)
	role := fset.String("role", "", "the credential's `ROLE`: client, observer, tool or admin")
	var tools toolNames
	fset.Var(&tools, "tool", "a tool `NAME` the credential serves (role tool)")
	out := fset.String("o", "", "the `FILE` to write (default NAME.creds)")
	pos, err := parse(fset, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("tahctl creds add --role client NAME", "give the credential's name, once")
	}
	name := pos[0]
	user, err := auth.RoleUser(wire.Role(*role), name, tools)
	if err != nil || wire.Role(*role) == wire.RoleNode {
		if err == nil {
			err = errors.New("the node's credential is the data directory's node.creds: it is not issued")
		}
		return usageError("tahctl creds add --role client|observer|tool|admin [--tool NAME] NAME", "%v", err)
	}
	dir := g.resolve().dataDir
	trust, err := auth.Load(dir)
	if err != nil {
		return errorf(exitFailed, "run it on the node's machine, in its directory, or give --data-dir DIR",
			"no trust material to sign with (in %q): %v", dir, err)
	}
	issued, err := trust.Issue(user)
	if err != nil {
		return errorf(exitFailed, "", "%v", err)
	}
	path := *out
	if path == "" {
		path = name + ".creds"
	}
	if err := writeCreds(path, issued.Creds); err != nil {
		return err
	}
	if g.json {
		return printJSON(g.stdout, map[string]any{"name": name, "role": *role, "tools": tools, "public_key": issued.PublicKey,
			"issued": issued.IssuedAt, "file": path})
	}
	fmt.Fprintf(g.stdout, "%s: %s credential %s (%s)\n", path, *role, name, issued.PublicKey)
	return nil
}

// writeCreds writes a new credential file, 0600, refusing to replace one.
func writeCreds(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return usageError("choose another name, or -o FILE", "%s exists already", path)
	}
	if err != nil {
		return errorf(exitFailed, "", "%v", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return errorf(exitFailed, "", "%s: %v", filepath.Base(path), err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return errorf(exitFailed, "", "%s: %v", filepath.Base(path), err)
	}
	return nil
}
