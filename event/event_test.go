package event

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/llm"
)

func TestNewDecodeRoundTrip(t *testing.T) {
	for _, typ := range Types() {
		p := Payload(typ)
		if p == nil {
			t.Fatalf("%s has no payload", typ)
		}
		if _, err := New("s1", typ, p); err != nil {
			t.Errorf("%s: New with its own payload: %v", typ, err)
		}
	}
	e, err := New("s1", TurnStarted, TurnStartedData{Turn: 1, Message: llm.User("hi")})
	if err != nil {
		t.Fatal(err)
	}
	e.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e.Epoch = 3
	body, err := EncodeRecord([]Event{e})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := DecodeRecord(body, 42)
	if err != nil || len(evs) != 1 {
		t.Fatal(evs, err)
	}
	back := evs[0]
	if back.Seq != 42 || back.Index != 0 || back.Epoch != 3 || !back.Time.Equal(e.Time) || back.Type != TurnStarted {
		t.Fatalf("%+v", back)
	}
	d, err := DecodeAs[TurnStartedData](back)
	if err != nil || d.Message.Content != "hi" {
		t.Fatalf("%+v %v", d, err)
	}
	if _, err := DecodeAs[AgentFinishedData](back); !errors.Is(err, ErrMalformed) {
		t.Fatalf("DecodeAs with the wrong type: %v", err)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := New("s", "no.such.type", struct{}{}); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type: %v", err)
	}
	if _, err := New("s", TurnStarted, AgentFinishedData{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("wrong payload: %v", err)
	}
}

func TestValidSessionID(t *testing.T) {
	ok := []string{"s_1", "abc", "A-b_9", strings.Repeat("x", MaxSessionIDLen), NewSessionID(),
		"acme.s_1", "a-1.A-b_9", "acme." + NewSessionID(), strings.Repeat("t", MaxTenantLen) + ".x"}
	bad := []string{"", "a*", "a>", "a b", "a\tb", "é", "a/b", strings.Repeat("x", MaxSessionIDLen+1), "$JS",
		// tenants: one '.', a valid tenant before it, a token after it
		"a.b.c", ".b", "a.", "A.b", "1a.b", "a_b.c", "a..b", "a.b*", strings.Repeat("t", MaxTenantLen+1) + ".x", "a." + strings.Repeat("x", MaxSessionIDLen-1)}
	for _, id := range ok {
		if err := ValidSessionID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range bad {
		if err := ValidSessionID(id); !errors.Is(err, ErrInvalidSessionID) {
			t.Errorf("%q accepted", id)
		}
	}
	for sid, tenant := range map[string]string{"s_1": "", "acme.s_1": "acme"} {
		if got := TenantOf(sid); got != tenant {
			t.Errorf("TenantOf(%q) = %q, want %q", sid, got, tenant)
		}
		if got := InTenant(tenant, strings.TrimPrefix(sid, tenant+TenantSep)); got != sid {
			t.Errorf("InTenant(%q, …) = %q, want %q", tenant, got, sid)
		}
	}
	if a, b := NewSessionID(), NewSessionID(); a == b || !strings.HasPrefix(a, "s_") || len(a) != 22 {
		t.Errorf("ids %q %q", a, b)
	}
}
