package wire

// Headers of TAH's messages. NATS's own (Nats-Msg-Id, the micro error
// headers) are listed too, because the contract gives them a meaning.
const (
	// HeaderCommand names the Command of an input: run, resume, cancel or compact.
	HeaderCommand = "Tah-Command"
	// HeaderReplyTo is an input's optional core NATS subject where the owner
	// publishes the command's Outcome when it ends (and where a malformed
	// input is reported besides tah.sess.<sid>.err).
	HeaderReplyTo = "Tah-Reply-To"
	// HeaderInputID names the input a refusal (Refusal) is about.
	HeaderInputID = "Tah-Input-Id"
	// HeaderEpoch is the ownership epoch of the publisher of a delta (decimal).
	HeaderEpoch = "Tah-Epoch"
	// HeaderDeltaSeq numbers the deltas of one epoch from 1 (decimal).
	HeaderDeltaSeq = "Tah-Delta-Seq"

	// HeaderCallID, HeaderSession and HeaderDeadline repeat a ToolRequest's
	// call id, session and deadline (RFC 3339 with nanoseconds, UTC) for
	// services that route on headers; the body wins when both are set.
	HeaderCallID   = "Tah-Call-Id"
	HeaderSession  = "Tah-Session"
	HeaderDeadline = "Tah-Deadline"

	// HeaderMsgID is JetStream's de-duplication header: an input's session
	// and id (InputMsgID), an event's writer position.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderServiceError and HeaderServiceErrorCode are the micro framework's
	// error headers: a one-line description and a code (APIError*, or a tool
	// service's status).
	HeaderServiceError     = "Nats-Service-Error"
	HeaderServiceErrorCode = "Nats-Service-Error-Code"
)
