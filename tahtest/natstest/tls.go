package natstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLSFiles are the PEM files of a test's TLS: a self-signed CA, and a
// certificate it signed for 127.0.0.1 and localhost, good for a server and a
// client alike (a route is both), with its key.
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
}

// WriteTLS makes a fresh CA and a certificate signed by it into dir
// (ca.pem, cert.pem, key.pem), as docs/security.md shows it done.
func WriteTLS(tb TB, dir string) TLSFiles {
	tb.Helper()
	f, err := WriteTLSFiles(dir)
	if err != nil {
		tb.Fatalf("natstest: TLS files: %v", err)
	}
	return f
}

// WriteTLSFiles is WriteTLS for a caller that is no test (a test script's
// command).
func WriteTLSFiles(dir string) (TLSFiles, error) {
	f := TLSFiles{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tah test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "tah node"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return f, err
	}
	for _, w := range []struct {
		path, kind string
		der        []byte
		perm       os.FileMode
	}{{f.CAFile, "CERTIFICATE", caDER, 0o644}, {f.CertFile, "CERTIFICATE", leafDER, 0o644}, {f.KeyFile, "PRIVATE KEY", keyDER, 0o600}} {
		if err := os.WriteFile(w.path, pem.EncodeToMemory(&pem.Block{Type: w.kind, Bytes: w.der}), w.perm); err != nil {
			return f, err
		}
	}
	return f, nil
}
