package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/wire"
)

const credsHelp = `tahctl creds add --role ROLE [--tool NAME]... [--tenant TENANT] NAME issues a NATS credential of
a role and writes it to <data dir>/creds/NAME.creds (mode 0600; without a data
directory, to the user's configuration directory: ~/.config/tah/creds on
Linux; -o FILE writes it elsewhere), a file that tahctl --creds, the Go
client, nats.js and nats --creds take as it is. It holds a secret key: it is
written out of the working directory so that it never lands in a project's
version control (the data directory ignores itself for git). tahctl creds ls lists
the issued credentials; tahctl creds revoke NAME revokes every credential of
that name, on every server of the cluster at once (no restart) and for good.
The roles (docs/security.md says what each may do):
  client    send inputs and API requests, read events and deltas
  observer  read only: the API's reads, events, deltas
  tool      serve the tools named by --tool (repeat it, or comma-separate)
  admin     a client that may also issue credentials
From any machine, with an admin credential (--server URL --creds admin.creds;
on the node's machine tahctl finds .tah/admin.creds): the key pair is made
here, the node signs its public key, and the seed never leaves this machine.
When no node runs, tahctl issues and revokes with the trust material of the
data directory (--data-dir), and the node applies it at its next start.
For an external NATS cluster, whose operator issues users with nsc, tahctl
creds nsc --role ROLE [--tool NAME]... [--tenant NAME] NAME prints the nsc
command that makes the same user. With --tenant NAME (role client or observer), a credential of
a tenant that tahctl tenant add added: it uses that tenant's sessions only.`

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

// runCreds is `tahctl creds add|ls|revoke|nsc`.
func runCreds(ctx context.Context, g *globals, args []string) error {
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	switch sub {
	case "add":
		return credsAdd(ctx, g, args[1:])
	case "ls":
		return credsList(ctx, g, args[1:])
	case "revoke":
		return credsRevoke(ctx, g, args[1:])
	case "nsc":
		return credsNSC(g, args[1:])
	}
	return usageError("tahctl creds add --role client NAME; tahctl creds ls; tahctl creds revoke NAME; tahctl creds nsc --role client NAME",
		"creds: the subcommands are add, ls, revoke and nsc")
}

// credsAdd is `tahctl creds add --role ROLE [--tool NAME]... NAME`.
func credsAdd(ctx context.Context, g *globals, args []string) error {
	fset := g.flags("creds add", "--role ROLE [--tool NAME]... NAME", credsHelp)
	role := fset.String("role", "", "the credential's `ROLE`: client, observer, tool, admin, or agents (an agent protocol gateway's)")
	var tools toolNames
	fset.Var(&tools, "tool", "a tool `NAME` the credential serves (role tool)")
	tenant := fset.String("tenant", "", "make it a credential of tenant `NAME`: a client or an observer of that tenant's sessions only, or a tool serving them (docs/tenancy.md)")
	out := fset.String("o", "", "the `FILE` to write (default: <data dir>/creds/NAME.creds, or the user's configuration directory's tah/creds/NAME.creds when there is no data directory)")
	pos, err := parse(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("tahctl creds add --role client NAME", "give the credential's name, once")
	}
	name := pos[0]
	user, err := auth.RoleUser(wire.Role(*role), name, tools)
	if *tenant != "" && err == nil {
		user, err = auth.TenantUser(*tenant, wire.Role(*role), name, tools)
	}
	if err != nil || wire.Role(*role) == wire.RoleNode {
		if err == nil {
			err = errors.New("the node's credential is the data directory's node.creds: it is not issued")
		}
		return usageError("tahctl creds add --role client|observer|tool|admin|agents [--tool NAME] NAME", "%v", err)
	}
	path := *out
	if path == "" {
		if path, err = credsFile(g.resolve().dataDir, name); err != nil {
			return err
		}
	}
	if fileExists(path) {
		return usageError("choose another name, or -o FILE", "%s exists already", shortPath(path))
	}
	t, err := credsTargetOf(ctx, g)
	if err != nil {
		return err
	}
	defer t.close()
	var creds []byte
	var c wire.Credential
	switch {
	case t.api != nil && *tenant != "":
		if creds, c, err = t.api.IssueTenantCreds(ctx, *tenant, name, wire.Role(*role), tools...); err != nil {
			return t.failed(wire.EndpointCredsAdd, err)
		}
	case t.api != nil:
		if creds, c, err = t.api.IssueCreds(ctx, name, wire.Role(*role), tools); err != nil {
			return t.failed(wire.EndpointCredsAdd, err)
		}
	case *tenant != "":
		return errorf(exitUnavailable, "start the node (tah-node), or reach one with --server URL --creds admin.creds",
			"a tenant's credential is issued by a running node, which checks that the tenant was added (tahctl tenant add %s)", *tenant)
	default:
		if creds, c, err = issueLocally(t.trust, user, wire.Credential{Name: name, Role: wire.Role(*role), Tools: tools}); err != nil {
			return err
		}
	}
	if err := writeCreds(path, creds); err != nil {
		return errorf(exitFailed, "revoke it with `tahctl creds revoke "+name+"` and issue it again",
			"credential %s is issued, but not written: %v", name, err)
	}
	if t.api == nil {
		fmt.Fprintln(g.stderr, "no node runs: issued from the data directory; the node registers it at its next start")
	}
	if g.json {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		return printJSON(g.stdout, struct {
			wire.Credential
			File string `json:"file"`
		}{c, path})
	}
	fmt.Fprintf(g.stdout, "%s: %s credential %s (%s)\n", shortPath(path), c.Role, name, c.PublicKey)
	fmt.Fprintf(g.stderr, "  it holds a secret key (mode 0600): give it with --creds %s, and keep it out of version control\n", shortPath(path))
	return nil
}

// credsDir is the directory of the credentials that tahctl creds add issues,
// in the data directory (or, without one, in the user's configuration
// directory's tah/).
const credsDir = "creds"

// credsFile is where tahctl creds add writes the credential name when -o does
// not say: <dataDir>/creds/NAME.creds, or, when no data directory is known
// (a machine that reaches a node with --server and --creds), the user's
// configuration directory's tah/creds/NAME.creds. Never the working
// directory: a credential is a secret, and the working directory is often a
// project under version control, where a `git add -A` would commit it. The
// directory is made as localnode.MakeDir makes it: mode 0700, with a
// .gitignore that ignores all of it.
func credsFile(dataDir, name string) (string, error) {
	dir := ""
	if dataDir != "" {
		if err := localnode.MakeDir(dataDir); err != nil {
			return "", errorf(exitFailed, "give the file to write with -o FILE", "the data directory %s: %v", dataDir, err)
		}
		dir = filepath.Join(dataDir, credsDir)
	} else {
		conf, err := os.UserConfigDir()
		if err != nil {
			return "", errorf(exitFailed, "give the file to write with -o FILE, or a data directory with --data-dir DIR",
				"no data directory, and no configuration directory to write the credential into: %v", err)
		}
		dir = filepath.Join(conf, "tah", credsDir)
	}
	if err := localnode.MakeDir(dir); err != nil {
		return "", errorf(exitFailed, "give the file to write with -o FILE", "the credentials' directory %s: %v", dir, err)
	}
	return filepath.Join(dir, name+".creds"), nil
}

// shortPath is path relative to the working directory when it is under it
// (.tah/creds/alice.creds), else as it is: what a person types next.
func shortPath(path string) string {
	wd, err := os.Getwd()
	if err != nil || !filepath.IsAbs(path) {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return rel
	}
	return path
}

// issueLocally issues user with the data directory's trust material and
// records it in its registry, which the node imports at its next start.
func issueLocally(trust *auth.Trust, user auth.User, c wire.Credential) ([]byte, wire.Credential, error) {
	issued, err := trust.Issue(user)
	if err != nil {
		return nil, wire.Credential{}, errorf(exitFailed, "", "%v", err)
	}
	c.PublicKey, c.Issued = issued.PublicKey, issued.IssuedAt
	if err := trust.Record(c); err != nil {
		return nil, wire.Credential{}, errorf(exitFailed, "", "credential %s is issued, but not listed: %v", c.Name, err)
	}
	return issued.Creds, c, nil
}

// writeCreds writes a new credential file, 0600, refusing to replace one.
func writeCreds(path string, b []byte) error {
	err := localnode.WriteNew(path, b, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists already", path)
	}
	return err
}

// credsList is `tahctl creds ls`.
func credsList(ctx context.Context, g *globals, args []string) error {
	fset := g.flags("creds ls", "", credsHelp)
	if _, err := parse(fset, args); err != nil {
		return err
	}
	t, err := credsTargetOf(ctx, g)
	if err != nil {
		return err
	}
	defer t.close()
	var creds []wire.Credential
	if t.api != nil {
		if creds, err = t.api.ListCreds(ctx); err != nil {
			return t.failed(wire.EndpointCredsList, err)
		}
	} else {
		if creds, err = t.trust.Entries(); err != nil {
			return errorf(exitFailed, "", "%v", err)
		}
		fmt.Fprintln(g.stderr, "no node runs: listed from the data directory (credentials issued through another node of a cluster are not in it)")
	}
	if g.json {
		return printCredentials(g, creds)
	}
	tb := &table{}
	tb.add(plain("NAME"), plain("ROLE"), plain("TENANT"), plain("TOOLS"), plain("ISSUED"), plain("STATE"), plain("PUBLIC KEY"))
	for _, c := range creds {
		state := "valid"
		if c.Revoked {
			state = "revoked"
		}
		tenant := c.Tenant
		if tenant == "" {
			tenant = "-" // every tenant's
		}
		tb.add(plain(c.Name), plain(string(c.Role)), plain(tenant), plain(strings.Join(c.Tools, ",")), plain(c.Issued.Local().Format(time.DateTime)), plain(state), plain(c.PublicKey))
	}
	return tb.write(g.stdout)
}

// printCredentials prints creds as JSON, one object a line.
func printCredentials(g *globals, creds []wire.Credential) error {
	for _, c := range creds {
		if err := printJSON(g.stdout, c); err != nil {
			return err
		}
	}
	return nil
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
	t, err := credsTargetOf(ctx, g)
	if err != nil {
		return err
	}
	defer t.close()
	var revoked []wire.Credential
	if t.api != nil {
		if revoked, err = t.api.RevokeCreds(ctx, wire.CredsRevokeRequest{Name: pos[0]}); err != nil {
			return t.failed(wire.EndpointCredsRevoke, err)
		}
	} else {
		if revoked, err = revokeLocally(ctx, t.trust, pos[0]); err != nil {
			return err
		}
		fmt.Fprintln(g.stderr, "no node runs: revoked in the data directory; the node applies it at its next start")
	}
	if g.json {
		return printCredentials(g, revoked)
	}
	fmt.Fprintf(g.stdout, "revoked %d credential(s) named %s\n", len(revoked), pos[0])
	return nil
}

// revokeLocally revokes every valid credential named name of the data
// directory's registry in its trust material.
func revokeLocally(ctx context.Context, trust *auth.Trust, name string) ([]wire.Credential, error) {
	entries, err := trust.Entries()
	if err != nil {
		return nil, errorf(exitFailed, "", "%v", err)
	}
	var revoked []wire.Credential
	var pubs []string
	for _, e := range entries {
		if e.Name == name && !e.Revoked {
			e.Revoked = true
			revoked, pubs = append(revoked, e), append(pubs, e.PublicKey)
		}
	}
	if len(revoked) == 0 {
		return nil, errorf(exitNotFound, "tahctl creds ls lists the credentials", "no valid credential named %s", name)
	}
	if _, err := trust.Revoke(ctx, pubs); err != nil {
		return nil, errorf(exitFailed, "", "%v", err)
	}
	return revoked, nil
}

// credsNSC is `tahctl creds nsc --role ROLE [--tool NAME]... NAME`: the nsc
// command that makes a user of the role on an operator-run cluster, from the
// same table as the credentials tahctl issues.
func credsNSC(g *globals, args []string) error {
	fset := g.flags("creds nsc", "--role ROLE [--tool NAME]... NAME", credsHelp)
	role := fset.String("role", "", "the user's `ROLE`: node, client, observer, tool, admin or agents")
	var tools toolNames
	fset.Var(&tools, "tool", "a tool `NAME` the user serves (role tool)")
	tenant := fset.String("tenant", "", "a user of tenant `NAME`: a client or an observer of that tenant's sessions only, or a tool serving them (docs/tenancy.md)")
	pos, err := parse(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("tahctl creds nsc --role client NAME", "give the user's name, once")
	}
	p, err := wire.RolePermissions(wire.Role(*role), pos[0], tools)
	if *tenant != "" && err == nil {
		p, err = wire.TenantRolePermissions(*tenant, wire.Role(*role), pos[0], tools)
	}
	if err != nil {
		return usageError("tahctl creds nsc --role node|client|observer|tool|admin|agents [--tool NAME] [--tenant NAME] NAME", "%v", err)
	}
	cmd := []string{"nsc", "add", "user", "--account", "TAH", pos[0]}
	if *tenant != "" {
		// The tags tell TAH's clients the user's tenant (its API's subject).
		cmd = append(cmd, "--tag", auth.RoleTag+*role, "--tag", auth.TenantTag+*tenant)
	}
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

// credsTarget is where tahctl creds works: a node's credentials API, or,
// when no node runs, the data directory's trust material.
type credsTarget struct {
	api   *conn
	trust *auth.Trust
}

func (t credsTarget) close() {
	if t.api != nil {
		t.api.Close()
	}
}

// credsTargetOf connects to the node with an admin credential, or, when
// nothing answers, takes the data directory's trust material.
func credsTargetOf(ctx context.Context, g *globals) (credsTarget, error) {
	ep := g.resolve()
	cl, err := client.Connect(ctx, client.Options{URL: ep.url, CredsFile: ep.creds, TLSCAFile: ep.tlsCA, Name: "tahctl", RequestTimeout: g.timeout})
	if errors.Is(err, client.ErrNoServer) {
		trust, terr := auth.Load(ep.dataDir)
		if terr != nil {
			return credsTarget{}, errorf(exitUnavailable,
				"start the node, or reach one with --server URL --creds admin.creds; on the node's machine give --data-dir DIR",
				"no node answers at %s (%v), and the data directory %q holds no trust material to issue from", ep.url, err, ep.dataDir)
		}
		return credsTarget{trust: trust}, nil
	}
	if err != nil {
		return credsTarget{}, ep.connectError(err)
	}
	t := credsTarget{api: &conn{Client: cl, g: g, ep: ep}}
	if err := needAdmin(ep); err != nil {
		t.close()
		return credsTarget{}, err
	}
	return t, nil
}

// needAdmin refuses a credential that TAH issued with another role than
// admin: NATS would refuse its requests to the credentials API.
func needAdmin(ep endpoint) error {
	const try = "give an admin credential with --creds FILE (the node's data directory holds admin.creds; `tahctl creds add --role admin NAME` issues one)"
	if ep.creds == "" {
		return errorf(exitUnavailable, try, "tahctl creds needs an admin credential, and none was given")
	}
	role, err := auth.CredsRole(ep.creds)
	if err != nil {
		return errorf(exitUnavailable, try, "the credential %s: %v", ep.creds, err)
	}
	if role != "" && role != wire.RoleAdmin {
		return errorf(exitUnavailable, try, "tahctl creds needs an admin credential: %s is a credential of role %s", ep.creds, role)
	}
	return nil
}

// failed is the error of a call to the credentials API.
func (t credsTarget) failed(endpoint string, err error) error {
	var ae *client.APIError
	switch {
	case errors.Is(err, client.ErrNoNode):
		return errorf(exitFailed, "issue users with nsc: `tahctl creds nsc --role ROLE NAME` prints the command",
			"nothing at %s issues credentials (%s): a node on an external NATS cluster does not; the cluster's operator does", t.api.ep.url, wire.APISubject(endpoint))
	case errors.As(err, &ae) && ae.Code == wire.APIErrBadRequest:
		return usageError("tahctl creds add --role client|observer|tool|admin|agents [--tool NAME] NAME", "%s", ae.Message)
	case errors.As(err, &ae) && ae.Code == wire.APIErrNotFound:
		return errorf(exitNotFound, "tahctl creds ls lists the credentials", "%s", ae.Message)
	case errors.As(err, &ae) && ae.Code == wire.APIErrConflict:
		return errorf(exitFailed, "run it again: each run makes a new key pair", "%s", ae.Message)
	}
	return t.api.failed(endpoint, err)
}
