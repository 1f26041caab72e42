package natsx

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/wire"
)

// PublishChunk publishes a chunk of an agent protocol stream on subj.
func PublishChunk(nc *nats.Conn, subj, typ string, data any) error {
	return nc.Publish(subj, wire.EncodeChunk(typ, data))
}

// PublishTerminator ends an agent protocol stream on subj: an empty message
// without headers.
func PublishTerminator(nc *nats.Conn, subj string) error {
	return nc.PublishMsg(&nats.Msg{Subject: subj})
}

// PublishAgentError ends an agent protocol stream on subj with an error:
// the message with the micro error headers (status and the first line of
// e.Message) and e as its JSON body, then the terminator.
func PublishAgentError(nc *nats.Conn, subj string, status int, e wire.AgentError) error {
	m := nats.NewMsg(subj)
	line, _, _ := strings.Cut(e.Message, "\n")
	if line == "" {
		line = e.Error
	}
	m.Header.Set(wire.HeaderServiceErrorCode, strconv.Itoa(status))
	m.Header.Set(wire.HeaderServiceError, line)
	m.Data, _ = json.Marshal(e)
	if err := nc.PublishMsg(m); err != nil {
		return err
	}
	return PublishTerminator(nc, subj)
}
