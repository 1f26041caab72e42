package wire_test

import (
	"errors"
	"testing"

	"github.com/tah-dev/tah/wire"
)

// Only a client's own inbox is a reply subject; every subject a node or the
// server writes or serves is refused, as is anything that is not a subject.
func TestCheckReplySubject(t *testing.T) {
	for _, ok := range []string{"_INBOX.abc", "_INBOX.abc.def", "_INBOX_alice.x", "_INBOX_tool-1.a.b"} {
		if err := wire.CheckReplySubject(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "_INBOX", "_INBOX.", "_INBOX_", "_INBOX_.x", "_INBOX_alice", "_INBOX.*", "_INBOX.>", "_INBOX.a b",
		"_INBOXx.a", "x._INBOX.a",
		wire.ShardSubject(0, "s_1"), wire.InputSubject("s_1", ""), wire.PartitionSubject(1, "s_1", ""), wire.DeltaSubject("s_1"),
		wire.ErrorSubject("s_1"), wire.APISubject("get"), wire.ToolSubject("echo"), wire.NodeSubject("n1"),
		"$JS.API.STREAM.DELETE.TAH_IN", "$SYS.REQ.SERVER.PING", "$KV.tah_checkpoints.s_1",
	} {
		if err := wire.CheckReplySubject(bad); !errors.Is(err, wire.ErrReplySubject) {
			t.Errorf("%q: %v, want ErrReplySubject", bad, err)
		}
	}
	in := wire.Input{Command: wire.CommandRun, Text: "hi", ReplyTo: wire.ShardSubject(3, "s_victim")}
	if err := in.Validate(); !errors.Is(err, wire.ErrReplySubject) || !errors.Is(err, wire.ErrMalformedInput) {
		t.Fatalf("an input replying onto the log: %v", err)
	}
}
