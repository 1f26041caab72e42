package client

import (
	"os"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/tah-dev/tah/wire"
)

// credsOptions are the connection options of a .creds file: the credential,
// and the inbox prefix its name gives (wire.CredentialInbox: a client, observer,
// admin or tool credential may subscribe under its own prefix only, so that
// no one else receives its replies).
func credsOptions(path string) []nats.Option {
	opts := []nats.Option{nats.UserCredentials(path)}
	if name := credentialName(path); name != "" {
		opts = append(opts, nats.CustomInboxPrefix(wire.CredentialInbox(name)))
	}
	return opts
}

// credentialName is the name in the user JWT of the .creds file at path,
// when it can name an inbox; "" otherwise (the file is then reported by the
// connection, which reads it too).
func credentialName(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	token, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		return ""
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil || wire.ValidCredentialName(uc.Name) != nil {
		return ""
	}
	return uc.Name
}
