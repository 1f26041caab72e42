package bus

import (
	"errors"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/tools/artifacts"
	"github.com/tah-dev/tah/wire"
)

// Errors of this package. Functions wrap them with %w and add what they were
// doing; test for them with errors.Is.
var (
	// ErrFenced: another writer appended to the session after this writer's last
	// sequence (JetStream API error 10071; 10164, the subject's other append
	// still in process, is tried again until it says which): this writer has lost
	// ownership. Stop the session's work, cancel its LLM and tool calls and do not
	// ack its input. A fenced SessionWriter stays fenced.
	ErrFenced = errors.New("fenced: another writer owns the session")
	// ErrOutcomeUnknown: an append's acknowledgement was lost and the context ended
	// before reading the log back could tell whether it landed. The writer is
	// unusable: replay the session and open a new writer.
	ErrOutcomeUnknown = errors.New("append outcome unknown")
	// ErrInvalidSessionID is event.ErrInvalidSessionID: a session id that is not
	// a valid subject token.
	ErrInvalidSessionID = event.ErrInvalidSessionID
	// ErrInvalidEvent: an event that cannot be appended: an unknown type, a
	// session or epoch other than the writer's, or no payload.
	ErrInvalidEvent = errors.New("invalid event")
	// ErrPayloadTooLarge: a message larger than the server's max payload. Put
	// large outputs in the object store (PutArtifact) and reference them.
	ErrPayloadTooLarge = natsx.ErrPayloadTooLarge
	// ErrInvalidConfig: a Config that Validate refuses.
	ErrInvalidConfig = errors.New("invalid bus configuration")
	// ErrNotTakenOver: InputConsumer.TakeOver could not read or reset the
	// partition's consumer (its leader died with the node taken over, and
	// another is not elected yet): try again before pulling the partition.
	ErrNotTakenOver = errors.New("input partition not taken over yet")
	// ErrNotReady: the server or JetStream did not become ready in time.
	ErrNotReady = errors.New("NATS not ready")
	// ErrNotSetUp: the streams or buckets do not exist and this Bus may not
	// create them (Config.NoSetup).
	ErrNotSetUp = errors.New("TAH streams are not set up")
	// ErrIncompatibleSetup: the streams were set up by another version of TAH or
	// with a configuration that cannot be changed in place. The message says
	// what to do.
	ErrIncompatibleSetup = errors.New("incompatible TAH stream setup")
	// ErrMalformedInput is wire.ErrMalformedInput: an input message that
	// cannot be understood. Such a message is terminated and reported on
	// tah.sess.<sid>.err.
	ErrMalformedInput = wire.ErrMalformedInput
	// ErrArtifactCorrupt is artifacts.ErrCorrupt: an artifact whose size or
	// SHA-256 differs from its reference.
	ErrArtifactCorrupt = artifacts.ErrCorrupt
	// ErrClosed: the Bus is closed.
	ErrClosed = errors.New("bus closed")
)
