package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/wire"
)

const credsHelp = `tahctl creds add --role ROLE [--tool NAME]... NAME issues a NATS credential of
a role and writes it to NAME.creds (mode 0600), a file that tahctl --creds,
the Go client, nats.js and nats --creds take as it is. tahctl creds ls lists
the issued credentials; tahctl creds revoke NAME revokes every credential of
that name, on the running node at once (no restart) and for good. The roles
(docs/security.md says what each may do):
  client    send inputs and API requests, read events and deltas
  observer  read only: the API's reads, events, deltas
  tool      serve the tools named by --tool (repeat it, or comma-separate)
  admin     a client that may also issue credentials
It signs with the trust material of the node's data directory: run it on the
node's machine (tahctl finds .tah, or give --data-dir). For an external NATS
cluster, whose operator issues users with nsc, tahctl creds nsc --role ROLE
[--tool NAME]... NAME prints the nsc command that makes the same user.`

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

// runCreds is `tahctl creds add|ls|revoke`.
func runCreds(ctx context.Context, g *globals, args []string) error {
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	switch sub {
	case "add":
		return credsAdd(g, args[1:])
	case "ls":
		return credsList(g, args[1:])
	case "revoke":
		return credsRevoke(ctx, g, args[1:])
	case "nsc":
		return credsNSC(g, args[1:])
	}
	return usageError("tahctl creds add --role client NAME; tahctl creds ls; tahctl creds revoke NAME; tahctl creds nsc --role client NAME",
		"creds: the subcommands are add, ls, revoke and nsc")
}

// localTrust is the trust material of the node's data directory.
func localTrust(g *globals) (*auth.Trust, endpoint, error) {
	ep := g.resolve()
	trust, err := auth.Load(ep.dataDir)
	if err != nil {
		return nil, ep, errorf(exitFailed, "run it on the node's machine, in its directory, or give --data-dir DIR",
			"no trust material in the data directory %q: %v", ep.dataDir, err)
	}
	return trust, ep, nil
}

// credsAdd is `tahctl creds add --role ROLE [--tool NAME]... NAME`.
func credsAdd(g *globals, args []string) error {
	fset := g.flags("creds add", "--role ROLE [--tool NAME]... NAME", credsHelp)
	role := fset.String("role", "", "the credential's `ROLE`: client, observer, tool or admin")
	var tools toolNames
	fset.Var(&tools, "tool", "a tool `NAME` the credential serves (role tool)")
	out := fset.String("o", "", "the `FILE` to write (default NAME.creds)")
	pos, err := parse(fset, args)
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
	trust, _, err := localTrust(g)
	if err != nil {
		return err
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
	if err := trust.Record(auth.Entry{Name: name, Role: *role, Tools: tools, PublicKey: issued.PublicKey, Issued: issued.IssuedAt}); err != nil {
		return errorf(exitFailed, "", "%s is written, but not listed: %v", path, err)
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
	err := localnode.WriteNew(path, b, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return usageError("choose another name, or -o FILE", "%s exists already", path)
	}
	if err != nil {
		return errorf(exitFailed, "", "%v", err)
	}
	return nil
}

// credsList is `tahctl creds ls`.
func credsList(g *globals, args []string) error {
	fset := g.flags("creds ls", "", credsHelp)
	if _, err := parse(fset, args); err != nil {
		return err
	}
	trust, _, err := localTrust(g)
	if err != nil {
		return err
	}
	entries, err := trust.Entries()
	if err != nil {
		return errorf(exitFailed, "", "%v", err)
	}
	if g.json {
		for _, e := range entries {
			if err := printJSON(g.stdout, e); err != nil {
				return err
			}
		}
		return nil
	}
	t := &table{}
	t.add(plain("NAME"), plain("ROLE"), plain("TOOLS"), plain("ISSUED"), plain("STATE"), plain("PUBLIC KEY"))
	for _, e := range entries {
		state := "valid"
		if e.Revoked {
			state = "revoked"
		}
		t.add(plain(e.Name), plain(e.Role), plain(strings.Join(e.Tools, ",")), plain(e.Issued.Local().Format(time.DateTime)), plain(state), plain(e.PublicKey))
	}
	return t.write(g.stdout)
}

// credsRevoke is `tahctl creds revoke NAME`: every credential of that name.
func credsRevoke(ctx context.Context, g *globals, args []string) error {
	fset := g.flags("creds revoke", "NAME", credsHelp)
	pos, err := parse(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("tahctl creds revoke NAME (tahctl creds ls lists them)", "give the credential's name, once")
	}
	trust, ep, err := localTrust(g)
	if err != nil {
		return err
	}
	entries, err := trust.Entries()
	if err != nil {
		return errorf(exitFailed, "", "%v", err)
	}
	n := 0
	for _, e := range entries {
		if e.Name != pos[0] || e.Revoked {
			continue
		}
		if _, err := trust.Revoke(e.PublicKey); err != nil {
			return errorf(exitFailed, "", "%v", err)
		}
		n++
	}
	if n == 0 {
		return errorf(exitNotFound, "tahctl creds ls lists the credentials", "no valid credential named %s", pos[0])
	}
	// Kept in the trust material: a node that does not run now applies it at
	// its next start.
	if err := trust.Push(ctx, ep.url); err != nil {
		return errorf(exitUnavailable, "the revocation is kept: the node applies it when it starts",
			"revoked %d credential(s) named %s, but the running node was not told: %v", n, pos[0], err)
	}
	fmt.Fprintf(g.stdout, "revoked %d credential(s) named %s\n", n, pos[0])
	return nil
}

// credsNSC is `tahctl creds nsc --role ROLE [--tool NAME]... NAME`: the nsc
// command that makes a user of the role on an operator-run cluster, from the
// same table as the credentials tahctl issues.
func credsNSC(g *globals, args []string) error {
	fset := g.flags("creds nsc", "--role ROLE [--tool NAME]... NAME", credsHelp)
	role := fset.String("role", "", "the user's `ROLE`: node, client, observer, tool or admin")
	var tools toolNames
	fset.Var(&tools, "tool", "a tool `NAME` the user serves (role tool)")
	pos, err := parse(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("tahctl creds nsc --role client NAME", "give the user's name, once")
	}
	p, err := wire.RolePermissions(wire.Role(*role), pos[0], tools)
	if err != nil {
		return usageError("tahctl creds nsc --role node|client|observer|tool|admin [--tool NAME] NAME", "%v", err)
	}
	cmd := []string{"nsc", "add", "user", "--account", "TAH", pos[0]}
	for _, f := range []struct {
		flag string
		list []string
	}{{"--allow-pub", p.PublishAllow}, {"--deny-pub", p.PublishDeny}, {"--allow-sub", p.SubscribeAllow}, {"--deny-sub", p.SubscribeDeny}} {
		if len(f.list) > 0 {
			cmd = append(cmd, f.flag, "'"+strings.Join(f.list, ",")+"'")
		}
	}
	if p.AllowResponses {
		cmd = append(cmd, "--allow-pub-response=-1", "--response-ttl", "1h")
	}
	_, err = fmt.Fprintln(g.stdout, strings.Join(cmd, " "))
	return err
}
