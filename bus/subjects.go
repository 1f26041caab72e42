package bus

// JetStream's own header of a fenced append (docs/protocol.md, Appending).
// TAH's subjects, headers and names are in package wire.
const hdrExpectLastSubjSeq = "Nats-Expected-Last-Subject-Sequence"
