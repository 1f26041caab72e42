module github.com/tah-dev/tah/deploy

go 1.26.0

toolchain go1.27.3

require (
	github.com/google/go-containerregistry v0.22.1
	github.com/tah-dev/tah v0.0.0
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/nats-io/jwt/v2 v2.8.3 // indirect
	github.com/nats-io/nats.go v1.55.0 // indirect
	github.com/nats-io/nkeys v0.4.17 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/prometheus/client_golang v1.24.0 // indirect
	github.com/sirupsen/logrus v1.10.1 // indirect
	go.opentelemetry.io/otel/exporters/prometheus v0.64.0 // indirect
	go.yaml.in/yaml/v4 v4.0.0-rc.4 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/tah-dev/tah => ../
