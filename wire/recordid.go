package wire

import (
	"strconv"
	"strings"
)

// recordAppendedAfter reads a record's Nats-Msg-Id, written by a session's
// owner as <sid>:<epoch>:<writer nonce>:<expected last sequence>: it returns
// the sequence the record was appended after, which is its session's
// record before it (docs/protocol.md, appending). ok is false for an id of
// another form: another session's, an input's, or the <sid>:v1:... of a
// session copied from an old log (its last field names that log's
// sequences).
//
// A reader that knows the last record of the session it has, but not that
// record's id, tells a copy the stream stored twice by it (rule 5): a record
// whose id names a sequence before that last record is a copy of one it has.
func recordAppendedAfter(sid, id string) (after uint64, ok bool) {
	rest, found := strings.CutPrefix(id, sid+":")
	if !found || sid == "" {
		return 0, false
	}
	fields := strings.Split(rest, ":")
	if len(fields) != 3 || fields[1] == "" {
		return 0, false
	}
	if _, err := strconv.ParseUint(fields[0], 10, 64); err != nil {
		return 0, false // not an epoch: a legacy copy's v1, say
	}
	after, err := strconv.ParseUint(fields[2], 10, 64)
	if err != nil {
		return 0, false
	}
	return after, true
}

// CopyBefore reports whether the record of session sid with message id id
// is a copy of a record at or before last, the session's last record the
// reader has (0: none): its id names a sequence before last
// (recordAppendedAfter).
func CopyBefore(sid, id string, last uint64) bool {
	after, ok := recordAppendedAfter(sid, id)
	return ok && last > 0 && after < last
}
