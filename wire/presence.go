package wire

// The NATS servers' client disconnect advisories of an account (operator
// mode): $SYS.ACCOUNT.<account public key>.DISCONNECT, published in the
// system account when a connection of the account closes, naming the server
// and the connection's client id there. A node subscribes to
// DisconnectAdvisories on its own connection, which receives them only where
// the TAH account imports its own from the system account (an embedded
// server's trust material does; an external NATS's operator must, see
// docs/operations.md): the others then take a node whose connection closed
// for dead at once instead of after NodeTTL of silence.
const (
	DisconnectAdvisories = "$SYS.ACCOUNT.*.DISCONNECT"
	// DisconnectAdvisoryAccountToken is the 1-based position of the account
	// in the advisory's subject (an export's account token position).
	DisconnectAdvisoryAccountToken = 3
)

// DisconnectAdvisory is the subject of account's disconnect advisories.
func DisconnectAdvisory(account string) string { return "$SYS.ACCOUNT." + account + ".DISCONNECT" }
