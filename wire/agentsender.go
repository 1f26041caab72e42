package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/nats-io/nuid"
)

// Sender identity, chapter 13 of the agent protocol: a caller proves which
// NATS user sent a prompt or status request by signing it with its user
// seed, in the Agent-Sender header. The subjects name only the receiver, so
// the sender travels with the message. A receiver classifies every request
// (SenderVerifier.Classify) as absent, claimed (a header without signature:
// display only, never grounds to grant anything) or verified; a consumer of
// a stream verifies stored messages (VerifyStoredAgentSender).
//
// TAH verifies sub by equality with the arrival subject only (§13.7.1 (a)):
// it configures no account_token_position and no import renames, so the
// other two forms never apply to it.
const (
	// HeaderAgentSender carries the sender's AgentSender as compact JSON
	// (AgentSender.Header). NATS matches header names case-sensitively.
	HeaderAgentSender = "Agent-Sender"

	// MetaMinSenderTrust is the key of the prompt endpoint's metadata that
	// declares what the endpoint requires of the sender: AgentSenderTrustAny
	// or AgentSenderTrustSigned. Its presence also says that the agent
	// implements chapter 13.
	MetaMinSenderTrust = "min_sender_trust"
	// AgentSenderTrustAny serves every request, whatever its sender: the
	// default, and what an endpoint without MetaMinSenderTrust implies.
	AgentSenderTrustAny = "any"
	// AgentSenderTrustSigned serves verified requests only; any other is
	// refused with AgentStatusUnauthorized.
	AgentSenderTrustSigned = "signed"

	// AgentSenderVersion is the header format (v) this package reads and
	// writes. A header of another v is treated as absent, so that a future
	// format does not break today's receivers.
	AgentSenderVersion = 1

	// DefaultSenderWindow is the replay window of a live request: how far
	// its ts may lie from the receiver's clock, either way, and how long
	// its nonce is remembered.
	DefaultSenderWindow = 30 * time.Second

	// MaxSenderNonces bounds the nonces a SenderVerifier remembers at once
	// (see SenderVerifier).
	MaxSenderNonces = 100_000

	// agentSenderTag is the first line of the signed input: it keeps these
	// signatures apart from every other signature of the same seed (the
	// connect handshake's, an id_sig), and names the format.
	agentSenderTag = "AGENT-SENDER-V1"
)

// Status and error codes of a sender refused on identity grounds. A
// malformed header is AgentStatusBadRequest with AgentErrBadRequest; a
// verified sender the receiver does not accept is AgentStatusForbidden.
const (
	// AgentStatusUnauthorized: a signature that does not verify (whatever
	// the endpoint requires), or an endpoint that requires one and got a
	// claimed or absent sender: nothing was authenticated.
	AgentStatusUnauthorized = 401
	// AgentErrUnauthorized is the error code of AgentStatusUnauthorized.
	AgentErrUnauthorized = "unauthorized"
	// AgentErrForbidden is the error code of AgentStatusForbidden: the
	// sender is verified, and not accepted.
	AgentErrForbidden = "forbidden"
)

// Errors of sender identity.
var (
	// ErrMalformedAgentSender: an Agent-Sender header that is not JSON,
	// lacks v, account or user, has a field of the wrong shape, or a sig
	// without all of sub, ts and nonce. The receiver rejects the request
	// with AgentStatusBadRequest; the caller fixes its header.
	ErrMalformedAgentSender = errors.New("malformed Agent-Sender header")
	// ErrUnverifiedAgentSender: a signed Agent-Sender header that fails
	// verification: a bad signature, another subject, a ts outside the
	// window, a replayed nonce. It is evidence of tampering or replay,
	// never a weaker claim: the receiver rejects the request with
	// AgentStatusUnauthorized whatever its MetaMinSenderTrust.
	ErrUnverifiedAgentSender = errors.New("unverified Agent-Sender header")
	// ErrSenderNoncesFull: a SenderVerifier that remembers MaxSenderNonces
	// nonces within its window and refuses to remember more (its error
	// wraps ErrUnverifiedAgentSender too). The sender may retry once older
	// nonces aged out; a receiver may answer it as rate limited instead.
	ErrSenderNoncesFull = errors.New("too many signed requests within the replay window")
)

// AgentSender is the value of the Agent-Sender header. Account and User are
// the sender's agent ID; Name is for display, outside the signature; Sub,
// TS, Nonce and Sig are set together on a signed header, and absent on a
// claim.
type AgentSender struct {
	// V is the header format, AgentSenderVersion.
	V int `json:"v"`
	// Account is the sender's account public NKEY (A…), or on a server
	// without operator mode the account's name ([A-Za-z0-9_-]+, or $G).
	Account string `json:"account"`
	// User is the sender's user public NKEY (U…): the verified identity.
	User string `json:"user"`
	// Name is a display name. Never identity: a relay may rewrite it.
	Name string `json:"name,omitempty"`
	// Sub is the subject the sender published to, as signed.
	Sub string `json:"sub,omitempty"`
	// TS is the time of the request, RFC 3339 (second precision and Z when
	// this package signs).
	TS string `json:"ts,omitempty"`
	// Nonce is unique per request of User: 1 to 64 of [A-Za-z0-9_-].
	Nonce string `json:"nonce,omitempty"`
	// Sig is the ed25519 signature by User's seed, base64url without
	// padding.
	Sig string `json:"sig,omitempty"`
}

// ID is the sender's agent ID in its canonical text form,
// {account}.{user}, or "" when either half is missing: there is no zero
// agent ID, and an empty key must never match one. It identifies only when
// the header was verified; a claimed ID is for display.
func (s AgentSender) ID() string {
	if s.Account == "" || s.User == "" {
		return ""
	}
	return s.Account + "." + s.User
}

// Header is s as the value of the Agent-Sender header: compact JSON on one
// line, without HTML escaping (a NATS header value carries the JSON as is).
func (s AgentSender) Header() string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil { // strings and an int only
		panic(fmt.Sprintf("wire: Agent-Sender header: %v", err))
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// SenderTrust is the trust class of a request's sender (§13.1).
type SenderTrust int

const (
	// SenderAbsent: no Agent-Sender header, or one of an unknown v. The
	// request has no sender.
	SenderAbsent SenderTrust = iota
	// SenderClaimed: a header without signature. Display only: logs,
	// threading; a receiver grants nothing on it.
	SenderClaimed
	// SenderVerified: a signed header that verified: the sender holds the
	// seed of its User.
	SenderVerified
)

func (t SenderTrust) String() string {
	switch t {
	case SenderAbsent:
		return "absent"
	case SenderClaimed:
		return "claimed"
	case SenderVerified:
		return "verified"
	}
	return "SenderTrust(" + strconv.Itoa(int(t)) + ")"
}

// Meets reports whether a sender of trust t is served by an endpoint that
// declares minSenderTrust (its MetaMinSenderTrust): "" and
// AgentSenderTrustAny serve everyone; AgentSenderTrustSigned, and any value
// this package does not know (the strictest it can satisfy, §13.9), serve
// verified senders only. A sender that does not meet it is refused with
// AgentStatusUnauthorized.
func (t SenderTrust) Meets(minSenderTrust string) bool {
	if minSenderTrust == "" || minSenderTrust == AgentSenderTrustAny {
		return true
	}
	return t == SenderVerified
}

// agentSenderJSON reads a header before its version is known: v as raw
// JSON, to tell the number 1 from the string "1" and from another version.
type agentSenderJSON struct {
	V       json.RawMessage `json:"v"`
	Account string          `json:"account"`
	User    string          `json:"user"`
	Name    string          `json:"name"`
	Sub     string          `json:"sub"`
	TS      string          `json:"ts"`
	Nonce   string          `json:"nonce"`
	Sig     string          `json:"sig"`
}

// ParseAgentSender reads the value of an Agent-Sender header. An empty value,
// or a header of a version other than AgentSenderVersion, is absent
// (present false, no error). A malformed header (§13.5.1) is an error
// wrapping ErrMalformedAgentSender. A present header is not yet trusted:
// Classify or VerifyStoredAgentSender says whether it is.
func ParseAgentSender(value string) (s AgentSender, present bool, err error) {
	if value == "" {
		return AgentSender{}, false, nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s %s: %w", HeaderAgentSender, fmt.Sprintf(format, args...), ErrMalformedAgentSender)
	}
	// v first: a header of another version may shape its other fields
	// differently, and is absent rather than malformed.
	var raw agentSenderJSON
	if err := json.Unmarshal([]byte(value), &struct {
		V *json.RawMessage `json:"v"`
	}{&raw.V}); err != nil {
		return AgentSender{}, false, bad("is not a JSON object: %v", err)
	}
	if len(raw.V) == 0 || string(raw.V) == "null" {
		return AgentSender{}, false, bad("has no v: set \"v\":%d", AgentSenderVersion)
	}
	if raw.V[0] != '-' && (raw.V[0] < '0' || raw.V[0] > '9') {
		return AgentSender{}, false, bad("has v %s, not a number: set \"v\":%d", raw.V, AgentSenderVersion)
	}
	if v, err := strconv.ParseFloat(string(raw.V), 64); err != nil || v != AgentSenderVersion {
		return AgentSender{}, false, nil // another format: absent, not malformed
	}
	if err := json.Unmarshal([]byte(value), &raw); err != nil {
		return AgentSender{}, false, bad("has a field of the wrong type: %v", err)
	}
	s = AgentSender{V: AgentSenderVersion, Account: raw.Account, User: raw.User, Name: raw.Name,
		Sub: raw.Sub, TS: raw.TS, Nonce: raw.Nonce, Sig: raw.Sig}
	if err := s.check(); err != nil {
		return AgentSender{}, false, bad("%v", err)
	}
	return s, true, nil
}

// check reports the first field of s of the wrong shape, or a sig without
// all of sub, ts and nonce.
func (s AgentSender) check() error {
	switch {
	case s.Account == "":
		return errors.New("has no account")
	case !validSenderAccount(s.Account):
		return fmt.Errorf("has account %q, neither an account NKEY (A…) nor a name of [A-Za-z0-9_-] nor $G", s.Account)
	case s.User == "":
		return errors.New("has no user")
	case !nkeys.IsValidPublicUserKey(s.User):
		return fmt.Errorf("has user %q, not a user public NKEY (U…)", s.User)
	case s.Nonce != "" && !validSenderNonce(s.Nonce):
		return fmt.Errorf("has nonce %q, not 1 to 64 of [A-Za-z0-9_-]", s.Nonce)
	}
	if s.TS != "" {
		if _, err := time.Parse(time.RFC3339Nano, s.TS); err != nil {
			return fmt.Errorf("has ts %q, not an RFC 3339 time", s.TS)
		}
	}
	if s.Sig == "" {
		return nil
	}
	if s.Sub == "" || s.TS == "" || s.Nonce == "" {
		return errors.New("has sig without all of sub, ts and nonce")
	}
	if b, err := base64.RawURLEncoding.DecodeString(s.Sig); err != nil || len(b) != 64 {
		return errors.New("has sig that is not 64 bytes in base64url without padding")
	}
	return nil
}

// validSenderAccount: an account public NKEY, or (on a server without
// operator mode) one token of [A-Za-z0-9_-], or the global account $G. A
// string of the NKEY's shape must pass the NKEY check: a name never looks
// like one.
func validSenderAccount(a string) bool {
	if a == "$G" {
		return true
	}
	if len(a) == 56 && a[0] == 'A' {
		return nkeys.IsValidPublicAccountKey(a)
	}
	return senderToken(a, len(a))
}

func validSenderNonce(n string) bool { return senderToken(n, 64) }

// senderToken: 1 to limit characters of [A-Za-z0-9_-].
func senderToken(s string, limit int) bool {
	if s == "" || len(s) > limit {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// AgentSenderSignedInput is the byte string a signature covers (§13.6.1):
// seven lines, each ending in one LF, the last the lowercase hex SHA-256 of
// the payload as published (of zero bytes when it is empty). It is never
// sent: signer and verifier each rebuild it.
func AgentSenderSignedInput(account, user, subject, ts, nonce string, payload []byte) []byte {
	sum := sha256.Sum256(payload)
	var b bytes.Buffer
	for _, line := range []string{agentSenderTag, account, user, subject, ts, nonce, hex.EncodeToString(sum[:])} {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// SignAgentSender is the signed header of a request of the user whose seed kp
// holds, in account, published to subject with payload at now: ts is now
// in UTC to the second, and nonce a fresh NUID when nonce is "". subject is
// the subject published to (for an import the caller's account renamed,
// the exporter's subject, §13.6.2). name is for display only. An account,
// key or nonce that would make the header malformed is an error wrapping
// ErrMalformedAgentSender.
func SignAgentSender(kp nkeys.KeyPair, account, name, subject string, payload []byte, now time.Time, nonce string) (AgentSender, error) {
	user, err := kp.PublicKey()
	if err != nil {
		return AgentSender{}, fmt.Errorf("agent sender not signed: %w", err)
	}
	if nonce == "" {
		nonce = nuid.Next()
	}
	s := AgentSender{V: AgentSenderVersion, Account: account, User: user, Name: name, Sub: subject,
		TS: now.UTC().Truncate(time.Second).Format(time.RFC3339), Nonce: nonce}
	if !ValidSubject(subject) {
		return AgentSender{}, fmt.Errorf("agent sender not signed: %q is not a subject to publish to: %w", subject, ErrMalformedAgentSender)
	}
	if err := s.check(); err != nil {
		return AgentSender{}, fmt.Errorf("agent sender not signed: %s %v: %w", HeaderAgentSender, err, ErrMalformedAgentSender)
	}
	sig, err := kp.Sign(AgentSenderSignedInput(s.Account, s.User, s.Sub, s.TS, s.Nonce, payload))
	if err != nil {
		return AgentSender{}, fmt.Errorf("agent sender not signed: %w", err)
	}
	s.Sig = base64.RawURLEncoding.EncodeToString(sig)
	return s, nil
}

// unverified is the error of a signed header that failed check why; what
// says what the sender does about it.
func unverified(why, what string) error {
	return fmt.Errorf("%w: %s: %s", ErrUnverifiedAgentSender, why, what)
}

// verifySignature verifies s's signature over arrivalSubject and payload,
// and that s signed arrivalSubject (§13.7.1 (a): equality, nothing else).
func (s AgentSender) verifySignature(arrivalSubject string, payload []byte) error {
	if s.Sub != arrivalSubject {
		return unverified(fmt.Sprintf("sub %q is not the subject %q the request arrived on", s.Sub, arrivalSubject),
			"sign the subject published to (for an import the caller's account renamed, the exporter's subject)")
	}
	pub, err := nkeys.FromPublicKey(s.User)
	if err != nil { // ParseAgentSender checked it
		return unverified(fmt.Sprintf("user %s: %v", s.User, err), "send the user public NKEY of the signing seed")
	}
	sig, err := base64.RawURLEncoding.DecodeString(s.Sig)
	if err == nil {
		err = pub.Verify(AgentSenderSignedInput(s.Account, s.User, s.Sub, s.TS, s.Nonce, payload), sig)
	}
	if err != nil {
		return unverified(fmt.Sprintf("sig does not verify against user %s", s.User),
			"sign with that user's seed, and send the header's fields and the payload unchanged")
	}
	return nil
}

// VerifyStoredAgentSender classifies the Agent-Sender header of a message
// read from a stream (§13.8): the signature and sub, against the subject the
// message was stored under, and neither the ts window nor the nonce set, as
// a redelivery or a replay shows the same record again by design. A valid
// signature proves who signed the content, not that the record is unique
// (deduplicate on User and Nonce) nor that its signer stored it. Errors
// wrap ErrMalformedAgentSender or ErrUnverifiedAgentSender, as Classify's.
func VerifyStoredAgentSender(header, storedSubject string, payload []byte) (AgentSender, SenderTrust, error) {
	s, trust, err := parseSigned(header)
	if err != nil || trust != senderSigned {
		return s, trust, err
	}
	if err := s.verifySignature(storedSubject, payload); err != nil {
		return s, SenderAbsent, err
	}
	return s, SenderVerified, nil
}

// senderSigned is what parseSigned says of a header with a signature, yet
// to be verified: never returned by the exported functions.
const senderSigned SenderTrust = -1

// parseSigned parses header as Classify and VerifyStoredAgentSender take
// it: absent, claimed, or signed (senderSigned) and to be verified; an
// error for a malformed one.
func parseSigned(header string) (AgentSender, SenderTrust, error) {
	s, present, err := ParseAgentSender(header)
	switch {
	case err != nil:
		return AgentSender{}, SenderAbsent, err
	case !present:
		return AgentSender{}, SenderAbsent, nil
	case s.Sig == "":
		return s, SenderClaimed, nil
	}
	return s, senderSigned, nil
}

// SenderVerifier classifies the senders of live requests (§13.7). It
// remembers the nonces of the requests it verified, per user, for as long
// as their ts lies within its window, so that the same signed request is
// accepted once. Its zero value uses DefaultSenderWindow and the clock; it
// is safe for concurrent use.
//
// The nonces are remembered by this verifier only: the instances of an
// agent behind one queue group do not share them, and a replay that lands
// on another instance is bounded by the ts window alone.
//
// It remembers at most MaxSenderNonces nonces, and refuses a request
// (ErrSenderNoncesFull) rather than remember more. Every sender with a
// seed can sign requests without end, and each one verified within the
// window costs a nonce, so an unbounded set would let any of them grow the
// receiver's memory at will; forgetting an unexpired nonce to make room
// would instead accept its replay. Refusing keeps both memory and the
// replay guarantee, at the cost of refusing new requests until older
// nonces age out: at the default window, over 3,000 verified requests a
// second.
type SenderVerifier struct {
	// Now is the receiver's clock; nil is time.Now. Tests set it, before
	// the first Classify.
	Now func() time.Time

	window time.Duration

	mu sync.Mutex
	// seen holds, per user and nonce, when the nonce can be forgotten: its
	// ts plus the window, when its ts no longer passes.
	seen      map[senderNonce]time.Time
	nextPrune time.Time
}

// senderNonce keys the nonce set: nonces are unique per user only.
type senderNonce struct{ user, nonce string }

// NewSenderVerifier is a SenderVerifier whose ts window is window either way
// of the receiver's clock (DefaultSenderWindow when 0 or less).
func NewSenderVerifier(window time.Duration) *SenderVerifier {
	return &SenderVerifier{window: window}
}

// Window is how far a request's ts may lie from the receiver's clock.
func (v *SenderVerifier) Window() time.Duration {
	if v.window <= 0 {
		return DefaultSenderWindow
	}
	return v.window
}

func (v *SenderVerifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// Classify classifies the sender of a request that arrived on
// arrivalSubject with payload, from the value of its Agent-Sender header
// (one header: a request that carries several is malformed, and the
// receiver says so before calling Classify):
//
//   - no header, or one of an unknown v: SenderAbsent;
//   - a malformed header: an error wrapping ErrMalformedAgentSender (400);
//   - a header without sig: SenderClaimed;
//   - a signed header that verifies against its user, signed
//     arrivalSubject, has a ts within the window and a nonce not seen for
//     its user within the window: SenderVerified, and its nonce is
//     remembered;
//   - a signed header that fails any of these: an error wrapping
//     ErrUnverifiedAgentSender (401, whatever the endpoint requires), that
//     says which check failed.
//
// The header is returned whenever it parsed, for logs.
func (v *SenderVerifier) Classify(header string, arrivalSubject string, payload []byte) (AgentSender, SenderTrust, error) {
	s, trust, err := parseSigned(header)
	if err != nil || trust != senderSigned {
		return s, trust, err
	}
	now, window := v.now(), v.Window()
	ts, _ := time.Parse(time.RFC3339Nano, s.TS) // ParseAgentSender checked it
	if skew := now.Sub(ts); skew > window || skew < -window {
		return s, SenderAbsent, unverified(
			fmt.Sprintf("ts %s is %s from the receiver's clock, beyond its %s window", s.TS, skew.Round(time.Second), window),
			"sign each request as it is sent, and keep the clock synchronised (NTP)")
	}
	if err := s.verifySignature(arrivalSubject, payload); err != nil {
		return s, SenderAbsent, err
	}
	// Last, so that only authenticated requests take room in the set.
	if err := v.remember(s.User, s.Nonce, ts.Add(window), now); err != nil {
		return s, SenderAbsent, err
	}
	return s, SenderVerified, nil
}

// remember records the nonce of user until forget, or reports it seen.
func (v *SenderVerifier) remember(user, nonce string, forget, now time.Time) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen == nil {
		v.seen = make(map[senderNonce]time.Time)
	}
	// Prune at most twice a window, or when full: a pass costs the whole
	// map, and an expired entry is ignored below until then.
	if !now.Before(v.nextPrune) || len(v.seen) >= MaxSenderNonces {
		for k, until := range v.seen {
			if !now.Before(until) {
				delete(v.seen, k)
			}
		}
		v.nextPrune = now.Add(v.Window() / 2)
	}
	k := senderNonce{user, nonce}
	if until, ok := v.seen[k]; ok && now.Before(until) {
		return unverified(fmt.Sprintf("nonce %q was already used by user %s within the %s window", nonce, user, v.Window()),
			"a replay is refused; send a fresh nonce (a NUID) with every request")
	}
	if len(v.seen) >= MaxSenderNonces {
		return fmt.Errorf("%w: %w: %d nonces remembered: retry once they age out (%s)",
			ErrUnverifiedAgentSender, ErrSenderNoncesFull, len(v.seen), v.Window())
	}
	v.seen[k] = forget
	return nil
}

// nonces is how many nonces v remembers, expired ones not yet pruned
// included.
func (v *SenderVerifier) nonces() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.seen)
}
