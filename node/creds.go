package node

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

// credsSetupTry bounds one try of the credentials API's setup: registering
// the local credentials and merging the account's revocations.
const credsSetupTry = 10 * time.Second

// credsAPI serves the credentials API (tah.api.creds.*) from the trust
// material of the node's data directory: it signs user JWTs for the public
// keys admins send (their seeds never travel), keeps the registry of issued
// credentials in wire.CredsBucket, and revokes by merging the revocations
// into the account JWT of the registry before every server is handed it.
type credsAPI struct {
	n     *Node
	trust *auth.Trust
	kv    jetstream.KeyValue
}

// addCredsEndpoints serves the credentials API on svc when the node embeds
// its NATS server, whose trust material it holds; a node on an external
// cluster does not (its operator issues users with nsc). It first registers
// the credentials issued from the data directory while no node ran, and
// merges the account's revocations of the data directory, the registry and
// the server, so that none is rolled back.
func (n *Node) addCredsEndpoints(ctx context.Context, svc micro.Service) error {
	if n.bus.Server() == nil {
		return nil
	}
	trust, err := auth.Load(n.bus.Config().DataDir)
	if err != nil {
		return fmt.Errorf("credentials API: %w", err)
	}
	a := &credsAPI{n: n, trust: trust}
	// Retried, as the bus's own setup is, while a forming cluster places the
	// bucket and elects its leader (slow on a loaded machine), within the
	// time a node has to get ready.
	setupCtx, cancel := context.WithCancel(ctx)
	if ready := n.bus.Config().ReadyTimeout; ready > 0 {
		setupCtx, cancel = context.WithTimeout(ctx, ready)
	}
	defer cancel()
	err = natsx.Retry(setupCtx, credsSetupTry, func(ctx context.Context) error {
		if a.kv == nil {
			kv, err := n.bus.EnsureKV(ctx, jetstream.KeyValueConfig{Bucket: wire.CredsBucket,
				Description: "TAH issued credentials by public key, and the account's JWT (docs/protocol.md)"})
			if err != nil {
				return err
			}
			a.kv = kv
		}
		if err := a.importLocal(ctx); err != nil {
			return err
		}
		return a.updateAccount(ctx, nil)
	}, func(err error) { n.log.Warn("setting up the credentials API: retrying", "error", err) })
	if err != nil {
		return fmt.Errorf("credentials API: %w", err)
	}
	for name, h := range map[string]micro.Handler{
		wire.EndpointCredsAdd:      endpoint(n, wire.EndpointCredsAdd, a.add),
		wire.EndpointCredsList:     endpoint(n, wire.EndpointCredsList, a.list),
		wire.EndpointCredsRevoke:   endpoint(n, wire.EndpointCredsRevoke, a.revoke),
		wire.EndpointTenantsAdd:    endpoint(n, wire.EndpointTenantsAdd, a.tenantAdd),
		wire.EndpointTenantsList:   endpoint(n, wire.EndpointTenantsList, a.tenantList),
		wire.EndpointTenantsRemove: endpoint(n, wire.EndpointTenantsRemove, a.tenantRemove),
		wire.EndpointTenantsSet:    endpoint(n, wire.EndpointTenantsSet, a.tenantSet),
	} {
		// A micro endpoint's name is one token: the subject says where.
		if err := svc.AddEndpoint(strings.ReplaceAll(name, ".", "-"), h, micro.WithEndpointSubject(wire.APISubject(name))); err != nil {
			return fmt.Errorf("api endpoint %s: %w", name, err)
		}
	}
	return nil
}

// importLocal registers the credentials that tahctl issued from the data
// directory while no node ran (trust/issued.jsonl); those registered
// already are left as they are.
func (a *credsAPI) importLocal(ctx context.Context) error {
	entries, err := a.trust.Entries()
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := a.register(ctx, e); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
	}
	return nil
}

// register adds c to the registry under its public key; jetstream's
// ErrKeyExists when the key is registered already.
func (a *credsAPI) register(ctx context.Context, c wire.Credential) error {
	c.Revoked = false
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = a.kv.Create(ctx, c.PublicKey, b)
	return err
}

func (a *credsAPI) add(ctx context.Context, req wire.CredsAddRequest) (wire.CredsAddReply, error) {
	if req.Role == wire.RoleNode {
		return wire.CredsAddReply{}, badRequest("the node role is not issued: a node runs with its data directory's node.creds; give role admin, client, tool or observer")
	}
	u, err := auth.RoleUser(req.Role, req.Name, req.Tools)
	if req.Tenant != "" {
		u, err = auth.TenantUser(req.Tenant, req.Role, req.Name, req.Tools)
		if err == nil {
			if _, err := a.tenant(ctx, req.Tenant); err != nil {
				return wire.CredsAddReply{}, err
			}
		}
	}
	if err != nil {
		return wire.CredsAddReply{}, badRequest("%v", err)
	}
	token, issued, err := a.trust.IssueFor(u, req.PublicKey)
	if errors.Is(err, auth.ErrBadPublicKey) {
		return wire.CredsAddReply{}, badRequest("public_key: %v: send the public key of a user nkey pair you made (tahctl creds add makes one)", err)
	}
	if err != nil {
		return wire.CredsAddReply{}, err
	}
	c := wire.Credential{Name: req.Name, Role: req.Role, Tenant: req.Tenant, Tools: req.Tools, PublicKey: req.PublicKey, Issued: issued}
	err = a.register(ctx, c)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return wire.CredsAddReply{}, &apiError{wire.APIErrConflict,
			fmt.Errorf("the public key %s is registered already: make a new key pair for each credential", req.PublicKey)}
	}
	if err != nil {
		return wire.CredsAddReply{}, fmt.Errorf("register the credential %s: %w", req.Name, err)
	}
	if req.Tenant != "" {
		// A tenant removed while this was issued (tenantRemove revoked the
		// credentials registered before it looked): revoke this one too.
		if _, err := a.tenant(ctx, req.Tenant); err != nil {
			if rerr := a.updateAccount(ctx, []string{req.PublicKey}); rerr != nil {
				return wire.CredsAddReply{}, fmt.Errorf("%w; and revoking the credential issued meanwhile: %w", err, rerr)
			}
			return wire.CredsAddReply{}, err
		}
	}
	a.n.log.Info("credential issued", "name", c.Name, "role", c.Role, "tenant", c.Tenant, "public_key", c.PublicKey)
	return wire.CredsAddReply{Credential: c, JWT: token}, nil
}

func (a *credsAPI) list(ctx context.Context, _ wire.EmptyRequest) (wire.CredsListReply, error) {
	creds, err := a.credentials(ctx)
	return wire.CredsListReply{Credentials: creds}, err
}

// credentials are the registered credentials, oldest first, each revoked
// or not by the account JWT the server holds. A read the registry's
// server cannot answer for a moment is tried again (natsx.Temporary): a
// server that has just been handed the account's new JWT (a revocation's)
// answers "jetstream not enabled" while it applies it.
func (a *credsAPI) credentials(ctx context.Context) ([]wire.Credential, error) {
	var out []wire.Credential
	err := natsx.Retry(ctx, natsx.PublishTry, func(ctx context.Context) error {
		var err error
		out, err = a.readCredentials(ctx)
		return err
	}, nil)
	return out, err
}

// readCredentials is one try of credentials.
func (a *credsAPI) readCredentials(ctx context.Context) ([]wire.Credential, error) {
	keys, err := a.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("the registry of credentials: %w", err)
	}
	defer keys.Stop()
	account := a.serverJWT()
	out := []wire.Credential{}
	for key := range keys.Keys() {
		if key == wire.CredsAccountKey || strings.HasPrefix(key, wire.CredsTenantKeyPrefix) {
			continue // not a credential: the account's JWT, a tenant
		}
		e, err := a.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("the registry of credentials: %w", err)
		}
		var c wire.Credential
		if err := json.Unmarshal(e.Value(), &c); err != nil {
			return nil, fmt.Errorf("the registry's entry %s: %w", key, err)
		}
		c.Revoked = auth.Revoked(account, c.PublicKey, c.Issued)
		out = append(out, c)
	}
	slices.SortFunc(out, func(x, y wire.Credential) int {
		return cmp.Or(x.Issued.Compare(y.Issued), cmp.Compare(x.Name, y.Name))
	})
	return out, nil
}

func (a *credsAPI) revoke(ctx context.Context, req wire.CredsRevokeRequest) (wire.CredsRevokeReply, error) {
	if (req.Name == "") == (req.PublicKey == "") {
		return wire.CredsRevokeReply{}, badRequest("give the name of the credentials to revoke, or the public_key of one (tah.api.creds.ls lists them)")
	}
	all, err := a.credentials(ctx)
	if err != nil {
		return wire.CredsRevokeReply{}, err
	}
	var revoked []wire.Credential
	var pubs []string
	for _, c := range all {
		if !c.Revoked && (c.Name == req.Name || c.PublicKey == req.PublicKey) {
			c.Revoked = true
			revoked, pubs = append(revoked, c), append(pubs, c.PublicKey)
		}
	}
	if len(revoked) == 0 {
		return wire.CredsRevokeReply{}, &apiError{wire.APIErrNotFound,
			fmt.Errorf("no valid credential named %q or of public key %q (tah.api.creds.ls lists them)", req.Name, req.PublicKey)}
	}
	if err := a.updateAccount(ctx, pubs); err != nil {
		return wire.CredsRevokeReply{}, err
	}
	a.n.log.Info("credentials revoked", "public_keys", pubs)
	return wire.CredsRevokeReply{Revoked: revoked}, nil
}

// updateAccount revokes pubs (none: only merges) in the account JWT of the
// registry, merged with the trust material's and the server's, and hands
// the result to the servers. The registry's JWT is replaced only by one
// signed later that holds all of its revocations (a compare-and-set: a
// node that lost the race merges again), so that a server, which keeps the
// newest JWT, never rolls a revocation back.
func (a *credsAPI) updateAccount(ctx context.Context, pubs []string) error {
	for {
		held, rev, err := a.registryJWT(ctx)
		if err != nil {
			return err
		}
		server := a.serverJWT()
		var token string
		if len(pubs) > 0 {
			token, err = a.trust.Revoke(ctx, pubs, held, server)
		} else {
			token, err = a.trust.Merge(ctx, held, server)
		}
		if err != nil {
			return err
		}
		if token != held {
			if rev == 0 {
				_, err = a.kv.Create(ctx, wire.CredsAccountKey, []byte(token))
			} else {
				_, err = a.kv.Update(ctx, wire.CredsAccountKey, []byte(token), rev)
			}
			if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				continue // another node changed it meanwhile: merge with its
			}
			if err != nil {
				return fmt.Errorf("keep the account's revocations in %s: %w", wire.CredsBucket, err)
			}
		}
		if token == server {
			return nil
		}
		return a.push(ctx)
	}
}

// registryJWT is the account JWT of the registry and its revision; "" and
// 0 when there is none yet.
func (a *credsAPI) registryJWT(ctx context.Context) (string, uint64, error) {
	var e jetstream.KeyValueEntry
	err := natsx.Retry(ctx, natsx.PublishTry, func(ctx context.Context) error {
		var err error
		e, err = a.kv.Get(ctx, wire.CredsAccountKey)
		return err
	}, nil) // as credentials: a moment's "jetstream not enabled" is tried again
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("the account's revocations in %s: %w", wire.CredsBucket, err)
	}
	return string(e.Value()), e.Revision(), nil
}

// serverJWT is the account JWT the node's server holds ("" when it cannot
// be read: the merge goes on without it).
func (a *credsAPI) serverJWT() string {
	token, err := a.n.bus.Server().AccountResolver().Fetch(a.trust.Account())
	if err != nil {
		return ""
	}
	return token
}

// push hands the trust's account JWT to the node's server, which passes it
// on to the cluster's other servers.
func (a *credsAPI) push(ctx context.Context) error {
	srv := a.n.bus.Server()
	// In process: no TLS, which a tls:// URL would demand.
	url := strings.Replace(srv.ClientURL(), "tls://", "nats://", 1)
	if err := a.trust.Push(ctx, url, nats.InProcessServer(srv)); err != nil {
		return fmt.Errorf("hand the account's revocations to the servers: %w", err)
	}
	return nil
}
