package wire

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// The known-answer vector operator-account-signed of the protocol's
// Appendix B.13: a throwaway test seed, published so that every SDK
// reproduces the same signature.
const (
	vectorSeed    = "SUAEJ6GDK6FSSB54LD45Q7W25AW7NUT7MVLBABIR5MIPFUTBW7ZNPK2KYE"
	vectorAccount = "AABYLMBR6Q2CDXTLGRQCFA2GP76BGCDF7NZF2OVHH4RQ7L3Y3TZWJDRL"
	vectorUser    = "UCDUW5V44EBDBIK2FL4CTNDBQFNGBEZVJHSZGQVKRHASN4AV4IWPB5NT"
	vectorSubject = "agents.prompt.demo-agent.alice.example"
	vectorPayload = `{"prompt":"hello"}`
	vectorTS      = "2026-08-28T12:00:00Z"
	vectorNonce   = "nonce-operator-account-signed"
	vectorInput   = "AGENT-SENDER-V1\n" + vectorAccount + "\n" + vectorUser + "\n" + vectorSubject + "\n" +
		vectorTS + "\n" + vectorNonce + "\n8a44725210b9dcd4fefd9f0eca07b70ae45e69274a3105fb25eb426a2cf8bbf4\n"
	vectorSig    = "EPGc0tNF0ZQeBqXUduwUp3zdi33k1AKIXOX-PUPSeY9QtS4V3d2EZLq-fHuPuYkw6Cc3HdVn_jVI58Y_3YBZBw"
	vectorHeader = `{"v":1,"account":"` + vectorAccount + `","user":"` + vectorUser + `","name":"claude-code","sub":"` +
		vectorSubject + `","ts":"` + vectorTS + `","nonce":"` + vectorNonce + `","sig":"` + vectorSig + `"}`
)

func TestAgentSenderVector(t *testing.T) {
	kp, err := nkeys.FromSeed([]byte(vectorSeed))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(AgentSenderSignedInput(vectorAccount, vectorUser, vectorSubject, vectorTS, vectorNonce, []byte(vectorPayload))); got != vectorInput {
		t.Fatalf("signed input\n%q\nwant\n%q", got, vectorInput)
	}
	now, _ := time.Parse(time.RFC3339, vectorTS)
	s, err := SignAgentSender(kp, vectorAccount, "claude-code", vectorSubject, []byte(vectorPayload), now.Add(400*time.Millisecond), vectorNonce)
	if err != nil {
		t.Fatal(err)
	}
	if s.User != vectorUser || s.TS != vectorTS || s.Sig != vectorSig {
		t.Fatalf("signed %+v, want user %s ts %s sig %s", s, vectorUser, vectorTS, vectorSig)
	}
	if h := s.Header(); h != vectorHeader || len(h) != 373 {
		t.Fatalf("header (%d bytes)\n%s\nwant (373 bytes)\n%s", len(h), h, vectorHeader)
	}
	if want := vectorAccount + "." + vectorUser; s.ID() != want || len(s.ID()) != 113 {
		t.Errorf("ID %q, want %q", s.ID(), want)
	}
	pub, _ := nkeys.FromPublicKey(vectorUser)
	sig, _ := base64.RawURLEncoding.DecodeString(vectorSig)
	if err := pub.Verify([]byte(vectorInput), sig); err != nil {
		t.Errorf("the vector's signature does not verify: %v", err)
	}
	v := NewSenderVerifier(0)
	v.Now = func() time.Time { return now }
	if got, trust, err := v.Classify(vectorHeader, vectorSubject, []byte(vectorPayload)); err != nil || trust != SenderVerified || got != s {
		t.Errorf("Classify = %+v, %v, %v; want %+v verified", got, trust, err, s)
	}
}

func TestAgentSenderEmptyPayload(t *testing.T) {
	in := string(AgentSenderSignedInput("ACME", "U", "s", "t", "n", nil))
	if want := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"; !strings.HasSuffix(in, "\n"+want) {
		t.Fatalf("signed input of an empty payload %q does not end in the SHA-256 of zero bytes", in)
	}
	kp, _ := nkeys.CreateUser()
	now := time.Date(2026, 4, 28, 14, 23, 1, 0, time.UTC)
	s, err := SignAgentSender(kp, "$G", "", "agents.status.tah.o.n", nil, now, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Nonce) != 22 {
		t.Errorf("nonce %q, want a NUID", s.Nonce)
	}
	v := NewSenderVerifier(0)
	v.Now = func() time.Time { return now }
	if _, trust, err := v.Classify(s.Header(), "agents.status.tah.o.n", []byte{}); err != nil || trust != SenderVerified {
		t.Errorf("empty payload: %v, %v", trust, err)
	}
}

// senderFixture is a caller (user, account) and another user, at a fixed
// time.
type senderFixture struct {
	user, other nkeys.KeyPair
	account     string
	now         time.Time
}

func newSenderFixture(t *testing.T) senderFixture {
	t.Helper()
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := nkeys.CreateUser()
	acc, _ := nkeys.CreateAccount()
	account, _ := acc.PublicKey()
	return senderFixture{user, other, account, time.Date(2026, 4, 28, 14, 23, 1, 0, time.UTC)}
}

func (f senderFixture) sign(t *testing.T, kp nkeys.KeyPair, subject, payload string, at time.Time, nonce string) AgentSender {
	t.Helper()
	s, err := SignAgentSender(kp, f.account, "caller", subject, []byte(payload), at, nonce)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f senderFixture) verifier() *SenderVerifier {
	v := NewSenderVerifier(30 * time.Second)
	v.Now = func() time.Time { return f.now }
	return v
}

func TestAgentSenderClassify(t *testing.T) {
	f := newSenderFixture(t)
	const subj, payload = "agents.prompt.tah.acme.new", `{"prompt":"hi"}`
	user, _ := f.user.PublicKey()
	signed := func(mod func(*AgentSender)) string {
		s := f.sign(t, f.user, subj, payload, f.now, "")
		if mod != nil {
			mod(&s)
		}
		return s.Header()
	}
	claim := fmt.Sprintf(`{"v":1,"account":%q,"user":%q,"name":"x"}`, f.account, user)
	for _, tc := range []struct {
		name, header, subject, payload string
		trust                          SenderTrust
		err                            error
	}{
		{"verified", signed(nil), subj, payload, SenderVerified, nil},
		{"ts within window", f.sign(t, f.user, subj, payload, f.now.Add(-29*time.Second), "").Header(), subj, payload, SenderVerified, nil},
		{"fractional ts", signed(func(s *AgentSender) {
			s.TS = f.now.Add(-1500 * time.Millisecond).Format("2006-01-02T15:04:05.000Z")
			sig, _ := f.user.Sign(AgentSenderSignedInput(s.Account, s.User, s.Sub, s.TS, s.Nonce, []byte(payload)))
			s.Sig = base64.RawURLEncoding.EncodeToString(sig)
		}), subj, payload, SenderVerified, nil},
		{"ts changed", signed(func(s *AgentSender) { s.TS = f.now.Add(time.Second).Format(time.RFC3339) }), subj, payload, SenderAbsent, ErrUnverifiedAgentSender},
		{"name rewritten", signed(func(s *AgentSender) { s.Name = "relay" }), subj, payload, SenderVerified, nil},
		{"absent", "", subj, payload, SenderAbsent, nil},
		{"unknown v", `{"v":2,"account":"?","user":5}`, subj, payload, SenderAbsent, nil},
		{"claimed", claim, subj, payload, SenderClaimed, nil},
		{"unknown fields ignored", strings.Replace(claim, `"name"`, `"extra":[1],"name"`, 1), subj, payload, SenderClaimed, nil},

		{"tampered payload", signed(nil), subj, `{"prompt":"ho"}`, SenderAbsent, ErrUnverifiedAgentSender},
		{"other subject", signed(nil), "agents.prompt.tah.acme.other", payload, SenderAbsent, ErrUnverifiedAgentSender},
		{"old ts", f.sign(t, f.user, subj, payload, f.now.Add(-31*time.Second), "").Header(), subj, payload, SenderAbsent, ErrUnverifiedAgentSender},
		{"future ts", f.sign(t, f.user, subj, payload, f.now.Add(31*time.Second), "").Header(), subj, payload, SenderAbsent, ErrUnverifiedAgentSender},
		{"signed by another key", signed(func(s *AgentSender) {
			o := f.sign(t, f.other, subj, payload, f.now, s.Nonce)
			s.Sig = o.Sig
		}), subj, payload, SenderAbsent, ErrUnverifiedAgentSender},
		{"account swapped", signed(func(s *AgentSender) { s.Account = "ACME" }), subj, payload, SenderAbsent, ErrUnverifiedAgentSender},
		{"nonce swapped", signed(func(s *AgentSender) { s.Nonce = "other" }), subj, payload, SenderAbsent, ErrUnverifiedAgentSender},

		{"not JSON", "v=1", subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"string v", strings.Replace(claim, `"v":1`, `"v":"1"`, 1), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"no v", strings.Replace(claim, `"v":1,`, ``, 1), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"null v", strings.Replace(claim, `"v":1`, `"v":null`, 1), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"no user", fmt.Sprintf(`{"v":1,"account":%q}`, f.account), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"no account", fmt.Sprintf(`{"v":1,"user":%q}`, user), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"user is an account key", fmt.Sprintf(`{"v":1,"account":%q,"user":%q}`, f.account, f.account), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"user of the wrong type", fmt.Sprintf(`{"v":1,"account":%q,"user":5}`, f.account), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"account with a space", fmt.Sprintf(`{"v":1,"account":"acme corp","user":%q}`, user), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"account failing its CRC", fmt.Sprintf(`{"v":1,"account":"AABYLMBR6Q2CDXTLGRQCFA2GP76BGCDF7NZF2OVHH4RQ7L3Y3TZWJDRM","user":%q}`, user), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"bad nonce chars", signed(func(s *AgentSender) { s.Nonce = "a.b" }), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"nonce too long", signed(func(s *AgentSender) { s.Nonce = strings.Repeat("n", 65) }), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"sig without ts", signed(func(s *AgentSender) { s.TS = "" }), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"sig without sub", signed(func(s *AgentSender) { s.Sub = "" }), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"ts not RFC 3339", signed(func(s *AgentSender) { s.TS = "2026-04-28 14:23:01" }), subj, payload, SenderAbsent, ErrMalformedAgentSender},
		{"sig not base64url", signed(func(s *AgentSender) { s.Sig = "+/==" }), subj, payload, SenderAbsent, ErrMalformedAgentSender},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, trust, err := f.verifier().Classify(tc.header, tc.subject, []byte(tc.payload))
			if trust != tc.trust || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("Classify(%s) = %v, %v; want %v, %v", tc.header, trust, err, tc.trust, tc.err)
			}
			if errors.Is(err, ErrMalformedAgentSender) && errors.Is(err, ErrUnverifiedAgentSender) {
				t.Errorf("%v is both malformed and unverified", err)
			}
		})
	}
}

func TestAgentSenderReplay(t *testing.T) {
	f := newSenderFixture(t)
	const subj = "agents.prompt.tah.acme.new"
	v := f.verifier()
	h := f.sign(t, f.user, subj, "p", f.now, "n1").Header()
	if _, trust, err := v.Classify(h, subj, []byte("p")); trust != SenderVerified || err != nil {
		t.Fatalf("first: %v, %v", trust, err)
	}
	_, trust, err := v.Classify(h, subj, []byte("p"))
	if trust != SenderAbsent || !errors.Is(err, ErrUnverifiedAgentSender) || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("replay: %v, %v", trust, err)
	}
	// Nonces are per user: another user may use the same one.
	if _, trust, err := v.Classify(f.sign(t, f.other, subj, "p", f.now, "n1").Header(), subj, []byte("p")); trust != SenderVerified || err != nil {
		t.Fatalf("same nonce, other user: %v, %v", trust, err)
	}
	// A request that fails verification takes no room.
	bad := f.sign(t, f.user, subj, "p", f.now, "n2").Header()
	if _, _, err := v.Classify(bad, subj, []byte("tampered")); !errors.Is(err, ErrUnverifiedAgentSender) {
		t.Fatal(err)
	}
	if _, trust, err := v.Classify(bad, subj, []byte("p")); trust != SenderVerified || err != nil {
		t.Fatalf("after a failed attempt: %v, %v", trust, err)
	}
}

func TestAgentSenderNoncesForget(t *testing.T) {
	f := newSenderFixture(t)
	const subj = "agents.prompt.tah.acme.new"
	v := f.verifier()
	now := f.now
	v.Now = func() time.Time { return now }
	if _, _, err := v.Classify(f.sign(t, f.user, subj, "p", now, "n1").Header(), subj, []byte("p")); err != nil {
		t.Fatal(err)
	}
	if n := v.nonces(); n != 1 {
		t.Fatalf("%d nonces, want 1", n)
	}
	// A nonce is kept while its ts passes: 30 s after a ts 20 s ahead.
	ahead := f.sign(t, f.user, subj, "p", now.Add(20*time.Second), "n2").Header()
	if _, _, err := v.Classify(ahead, subj, []byte("p")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(45 * time.Second)
	if _, _, err := v.Classify(ahead, subj, []byte("p")); !errors.Is(err, ErrUnverifiedAgentSender) || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("replay 45 s later, ts still within the window: %v", err)
	}
	// Its entry goes at the next pruning pass, at most half a window later.
	now = now.Add(16 * time.Second)
	if _, _, err := v.Classify(f.sign(t, f.user, subj, "p", now, "n3").Header(), subj, []byte("p")); err != nil {
		t.Fatal(err)
	}
	if n := v.nonces(); n != 1 {
		t.Fatalf("%d nonces after the window, want 1 (n3)", n)
	}
}

func TestAgentSenderNoncesFull(t *testing.T) {
	v := NewSenderVerifier(0)
	now := time.Date(2026, 4, 28, 14, 23, 1, 0, time.UTC)
	until := now.Add(v.Window())
	for i := range MaxSenderNonces {
		if err := v.remember("U", fmt.Sprint(i), until, now); err != nil {
			t.Fatalf("nonce %d: %v", i, err)
		}
	}
	err := v.remember("U", "one-more", until, now)
	if !errors.Is(err, ErrSenderNoncesFull) || !errors.Is(err, ErrUnverifiedAgentSender) {
		t.Fatalf("full set: %v", err)
	}
	if err := v.remember("U", "one-more", until.Add(v.Window()), until); err != nil {
		t.Fatalf("once the nonces aged out: %v", err)
	}
	if n := v.nonces(); n != 1 {
		t.Errorf("%d nonces, want 1", n)
	}
}

func TestAgentSenderStored(t *testing.T) {
	f := newSenderFixture(t)
	const subj = "tah.audit.acme"
	h := f.sign(t, f.user, subj, "record", f.now.Add(-72*time.Hour), "n1").Header()
	for range 2 { // neither the ts window nor the nonce set applies
		if _, trust, err := VerifyStoredAgentSender(h, subj, []byte("record")); trust != SenderVerified || err != nil {
			t.Fatalf("stored: %v, %v", trust, err)
		}
	}
	if _, trust, err := VerifyStoredAgentSender(h, "tah.audit.other", []byte("record")); trust != SenderAbsent || !errors.Is(err, ErrUnverifiedAgentSender) {
		t.Errorf("other subject: %v, %v", trust, err)
	}
	if _, _, err := VerifyStoredAgentSender(h, subj, []byte("recorD")); !errors.Is(err, ErrUnverifiedAgentSender) {
		t.Errorf("tampered payload: %v", err)
	}
	if _, _, err := VerifyStoredAgentSender(`{"v":"1"}`, subj, nil); !errors.Is(err, ErrMalformedAgentSender) {
		t.Errorf("malformed: %v", err)
	}
	if _, trust, err := VerifyStoredAgentSender("", subj, nil); trust != SenderAbsent || err != nil {
		t.Errorf("absent: %v, %v", trust, err)
	}
}

func TestAgentSenderSign(t *testing.T) {
	f := newSenderFixture(t)
	acc, _ := nkeys.CreateAccount()
	pub, _ := nkeys.FromPublicKey(f.account)
	for _, tc := range []struct {
		name    string
		kp      nkeys.KeyPair
		account string
		subject string
		nonce   string
	}{
		{"account key", acc, f.account, "a.b", ""},
		{"public key only", pub, f.account, "a.b", ""},
		{"bad account", f.user, "a.b", "a.b", ""},
		{"bad nonce", f.user, f.account, "a.b", "a b"},
		{"no subject", f.user, f.account, "", ""},
		{"wildcard subject", f.user, f.account, "a.>", ""},
	} {
		if _, err := SignAgentSender(tc.kp, tc.account, "", tc.subject, nil, f.now, tc.nonce); err == nil {
			t.Errorf("%s: signed", tc.name)
		}
	}
	s := f.sign(t, f.user, "a.b", "", f.now.Add(time.Hour).In(time.FixedZone("x", 3600)), "")
	if s.TS != "2026-04-28T15:23:01Z" {
		t.Errorf("ts %q, want UTC to the second", s.TS)
	}
	s.Name = "<a&b>"
	if h := s.Header(); !strings.Contains(h, `"name":"<a&b>"`) || strings.ContainsAny(h, "\r\n ") {
		t.Errorf("header %s: not compact JSON as is", h)
	}
	if _, _, err := ParseAgentSender(s.Header()); err != nil {
		t.Errorf("own header: %v", err)
	}
}

func TestAgentSenderConcurrent(t *testing.T) {
	f := newSenderFixture(t)
	const subj = "agents.prompt.tah.acme.new"
	v := f.verifier()
	h := f.sign(t, f.user, subj, "p", f.now, "same").Header()
	var wg sync.WaitGroup
	var mu sync.Mutex
	verified := 0
	for range 16 {
		wg.Go(func() {
			if _, trust, _ := v.Classify(h, subj, []byte("p")); trust == SenderVerified {
				mu.Lock()
				verified++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if verified != 1 {
		t.Errorf("one request verified %d times", verified)
	}
}

func TestAgentSenderTrust(t *testing.T) {
	for _, tc := range []struct {
		trust SenderTrust
		name  string
		min   string
		meets bool
	}{
		{SenderAbsent, "absent", "", true},
		{SenderClaimed, "claimed", AgentSenderTrustAny, true},
		{SenderClaimed, "claimed", AgentSenderTrustSigned, false},
		{SenderVerified, "verified", AgentSenderTrustSigned, true},
		{SenderClaimed, "claimed", "paranoid", false},
		{SenderVerified, "verified", "paranoid", true},
	} {
		if tc.trust.String() != tc.name || tc.trust.Meets(tc.min) != tc.meets {
			t.Errorf("%v meets %q: %v, want %s %v", tc.trust, tc.min, tc.trust.Meets(tc.min), tc.name, tc.meets)
		}
	}
	if (AgentSender{User: vectorUser}).ID() != "" {
		t.Error("a sender without account has an ID")
	}
}
