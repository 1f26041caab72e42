package natsx

import "github.com/nats-io/nats.go"

// TLSOptions are the connection options of a client's TLS files: caFile, the
// CA that signs the server's certificate; certFile and keyFile, the client's
// own certificate when the server asks for one. Empty names add nothing.
func TLSOptions(caFile, certFile, keyFile string) []nats.Option {
	var opts []nats.Option
	if caFile != "" {
		opts = append(opts, nats.RootCAs(caFile))
	}
	if certFile != "" {
		opts = append(opts, nats.ClientCert(certFile, keyFile))
	}
	return opts
}
