package wire

import "strconv"

// ProtocolVersion is the version of the whole wire contract: subjects,
// headers, streams, buckets, payloads, the API service and tool services. It
// is recorded in the streams' metadata (MetaProtocol), is the major version of
// the API service (APIVersion) and the tool services' MetaToolProtocol.
//
// A change that an older client, node or tool service cannot ignore raises it;
// additions that readers skip (a new event type, a new optional field, a new
// endpoint) do not.
const ProtocolVersion = 1

// APIVersion is the SemVer version of the micro service "tah" (the API):
// ProtocolVersion as the major version.
var APIVersion = strconv.Itoa(ProtocolVersion) + ".0.0"

// ProtocolString is ProtocolVersion as the decimal string that metadata
// values carry.
var ProtocolString = strconv.Itoa(ProtocolVersion)

// SetupVersion is the version of the stream, consumer and bucket layout
// (MetaSetup). A node finding an older layout updates it in place when NATS
// allows it; a node finding a newer one stops and asks to be upgraded.
const SetupVersion = 1
