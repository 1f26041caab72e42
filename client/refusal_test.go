package client_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

// TestRefusalsHaveOneShape: whatever the reason, a refused input gets one
// answer, an outcome of status refused with a failure code and the input's
// id (from Nats-Msg-Id when the body is not JSON), the same body on its
// reply subject and on the session's error subject.
func TestRefusalsHaveOneShape(t *testing.T) {
	ctx := ctxT(t)
	n := startNode(t, mock.Scripted(mock.Say("hi").Always()))
	c := connect(t, n)
	sid := newSession(t, c)
	js, err := jetstream.New(c.Conn())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, sid, id, cmd, body, code string
	}{
		{"not JSON", sid, "in_notjson", "run", `{"input": `, wire.CodeMalformedInput},
		{"no command", sid, "in_nocmd", "", `{"input":"hi"}`, wire.CodeMalformedInput},
		{"unknown session", "s_nobody", "in_nobody", "run", `{"input":"hi"}`, wire.CodeUnknownSession},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inbox := c.Conn().NewRespInbox()
			replies, err := c.Conn().SubscribeSync(inbox)
			if err != nil {
				t.Fatal(err)
			}
			defer replies.Unsubscribe()
			errs, err := c.Conn().SubscribeSync(wire.ErrorSubject(tc.sid))
			if err != nil {
				t.Fatal(err)
			}
			defer errs.Unsubscribe()
			m := nats.NewMsg(wire.InputSubject(tc.sid, "admin")) // the credential's name, which it must give
			m.Data = []byte(tc.body)
			m.Header.Set(wire.HeaderMsgID, tc.id)
			m.Header.Set(wire.HeaderReplyTo, inbox)
			if tc.cmd != "" {
				m.Header.Set(wire.HeaderCommand, tc.cmd)
			}
			if _, err := js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
			reply, err := replies.NextMsg(30 * time.Second)
			if err != nil {
				t.Fatalf("no answer on the reply subject: %v", err)
			}
			onErr, err := errs.NextMsg(30 * time.Second)
			if err != nil {
				t.Fatalf("no answer on the error subject: %v", err)
			}
			if !bytes.Equal(reply.Data, onErr.Data) {
				t.Errorf("two shapes:\n%s\n%s", reply.Data, onErr.Data)
			}
			want := `{"session":"` + tc.sid + `","input_id":"` + tc.id + `","turn":0,"status":"refused",`
			if !bytes.HasPrefix(reply.Data, []byte(want)) || !bytes.Contains(reply.Data, []byte(`"failure_code":"`+tc.code+`"`)) {
				t.Errorf("refusal %s", reply.Data)
			}
		})
	}
	// The client reads it as a CommandError that holds the refusal.
	_, err = startTurn(t, c, "s_nobody", "hello").Outcome(ctx)
	var ce *client.CommandError
	if !errors.Is(err, client.ErrNotFound) || !errors.As(err, &ce) || !ce.Outcome.Refused() || ce.Outcome.InputID != ce.InputID {
		t.Fatalf("%v %+v", err, ce)
	}
}
