package wire

import "strconv"

// ProtocolVersion is the version of the whole wire contract: subjects,
// headers, streams, buckets, payloads, the API service and tool services. It
// is recorded in the streams' metadata (MetaProtocol), is the major version of
// the API service (APIVersion) and the tool services' MetaToolProtocol.
//
// A change that an older client, node or tool service cannot ignore raises it;
// additions that readers skip (a new event type, a new optional field, a new
// endpoint) do not. Version 2 is the log of records in shards (TAH_EVT_<k>,
// tah.evt.<k>.<sid>); version 1 had one event per message in TAH_EVT.
const ProtocolVersion = 2

// APIVersion is the SemVer version of the micro service "tah" (the API):
// ProtocolVersion as the major version.
var APIVersion = strconv.Itoa(ProtocolVersion) + ".0.0"

// ProtocolString is ProtocolVersion as the decimal string that metadata
// values carry.
var ProtocolString = strconv.Itoa(ProtocolVersion)

// SetupVersion is the version of the stream, consumer and bucket layout
// (MetaSetup). A node finding an older layout updates it in place when NATS
// allows it (and migrates a log of version 1, the one stream TAH_EVT, into
// the shards of version 2); a node finding a newer one stops and asks to be
// upgraded. Version 3 adds the schedules' stream (ScheduleStream), which
// the input stream sources: an older node would drop that source. Version 4
// takes tenants' session ids (<tenant>.<id>): the shards store tah.evt.<k>.>,
// the input stream also sources TenantInputStream and tenants' fired
// schedules, and the partitions' consumers filter tah.in.<p>.>; an older node
// would take those back. Version 5 names the senders of the default
// tenant's inputs: TenantInputStream also stores tah.sess.*.in.by.*, which
// the input stream's source of it routes to tah.in.<p>.<sid>.<sender>; an
// older node would drop both.
const SetupVersion = 5
