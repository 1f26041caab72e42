package event

import (
	"crypto/rand"
	"fmt"
	"strings"
)

// MaxSessionIDLen is the longest session id accepted, a tenant's included.
const MaxSessionIDLen = 128

// MaxTenantLen is the longest tenant name.
const MaxTenantLen = 32

// TenantSep separates a tenant's name from the rest of its sessions' ids:
// "acme.s_7k2" is session "s_7k2" of tenant "acme" (docs/tenancy.md). An id
// without it is the default tenant's, as every id was before tenants.
const TenantSep = "."

// ValidSessionID reports, as an error wrapping ErrInvalidSessionID, whether id can
// name a session: 1 to 128 characters, either one token (a session of the
// default tenant) or a tenant's name, '.', and one token (ValidTenant), a
// token being letters, digits, '-' and '_'. Each token is a NATS subject
// token of its own, which is what lets the server tell tenants apart.
func ValidSessionID(id string) error {
	if id == "" {
		return fmt.Errorf("empty session id: %w", ErrInvalidSessionID)
	}
	if len(id) > MaxSessionIDLen {
		return fmt.Errorf("session id is %d bytes, at most %d allowed: %w", len(id), MaxSessionIDLen, ErrInvalidSessionID)
	}
	tenant, local, ok := strings.Cut(id, TenantSep)
	if !ok {
		return validToken(id, 0)
	}
	if err := ValidTenant(tenant); err != nil {
		return fmt.Errorf("session id %q: %w: %w", id, err, ErrInvalidSessionID)
	}
	if local == "" {
		return fmt.Errorf("session id %q: nothing after its tenant %q: %w", id, tenant, ErrInvalidSessionID)
	}
	return validToken(id, len(tenant)+1)
}

// validToken checks id[from:] for characters outside a token's.
func validToken(id string, from int) error {
	for i, r := range id[from:] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("session id %q: character %q at %d is not allowed (use letters, digits, '-' and '_', and one '.' after a tenant's name): %w",
				id, r, from+i, ErrInvalidSessionID)
		}
	}
	return nil
}

// ValidTenant reports what is wrong with a tenant's name: 1 to 32 lower-case
// letters, digits and '-', starting with a letter. (Lower case only, so that
// two tenants never differ by case alone in a file name or a URL; no '_', so
// that a tenant's name is never taken for a generated session id.)
func ValidTenant(name string) error {
	if name == "" {
		return fmt.Errorf("empty tenant name")
	}
	if len(name) > MaxTenantLen {
		return fmt.Errorf("tenant name %q is %d bytes, at most %d allowed", name, len(name), MaxTenantLen)
	}
	if name[0] < 'a' || name[0] > 'z' {
		return fmt.Errorf("tenant name %q must start with a lower-case letter", name)
	}
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Errorf("tenant name %q: character %q at %d is not allowed (use lower-case letters, digits and '-')", name, r, i)
		}
	}
	return nil
}

// TenantOf is the tenant of a valid session id: "" for the default tenant's.
func TenantOf(sid string) string {
	tenant, _, ok := strings.Cut(sid, TenantSep)
	if !ok {
		return ""
	}
	return tenant
}

// InTenant is the session id of local in tenant: local itself for the
// default tenant ("").
func InTenant(tenant, local string) string {
	if tenant == "" {
		return local
	}
	return tenant + TenantSep + local
}

const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz" // Crockford's base32, lower case

// NewSessionID returns a fresh random session id: "s_" and 20 base32 characters.
func NewSessionID() string { return "s_" + randomToken(20) }

// NewID returns a fresh random id with the given prefix, for steps and artifacts.
func NewID(prefix string) string { return prefix + randomToken(16) }

func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // never happens on supported platforms
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, c := range b {
		sb.WriteByte(idAlphabet[int(c)%len(idAlphabet)])
	}
	return sb.String()
}
