package sidecartest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// PKI is a certificate authority made for one test: it issues server and
// client certificates (ECDSA P-256, valid from an hour ago to an hour
// from now). A certificate from another CA, for a test that must see it
// refused, comes from a second NewPKI. A PKI may be used from several
// goroutines.
type PKI struct {
	ca     *x509.Certificate
	key    *ecdsa.PrivateKey
	pool   *x509.CertPool
	serial atomic.Int64 // the last serial number issued; the CA's is 1
}

// NewPKI returns a fresh CA.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{ca: ca, key: key, pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.serial.Store(1)
	return p
}

// Server issues a server certificate for 127.0.0.1, ::1, localhost and
// the extra DNS names given.
func (p *PKI) Server(t testing.TB, dnsNames ...string) tls.Certificate {
	t.Helper()
	return p.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "server"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    append([]string{"localhost"}, dnsNames...),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	})
}

// Client issues a client certificate with common name cn (the identity
// an authorization policy's certificates section names).
func (p *PKI) Client(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	return p.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// Pool returns a pool trusting the CA alone: RootCAs for clients,
// ClientCAs for servers.
func (p *PKI) Pool() *x509.CertPool { return p.pool }

// WriteCA writes the CA's certificate in PEM to dir/ca.pem and returns
// that path.
func (p *PKI) WriteCA(t testing.TB, dir string) string {
	t.Helper()
	return writeFile(t, dir, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ca.Raw}))
}

// WriteCert writes cert in PEM to dir/name.pem and its private key
// (PKCS #8) to dir/name.key, the files tls.LoadX509KeyPair reads, and
// returns their paths.
func WriteCert(t testing.TB, dir, name string, cert tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	var certPEM []byte
	for _, der := range cert.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return writeFile(t, dir, name+".pem", certPEM), writeFile(t, dir, name+".key", keyPEM)
}

// issue completes tmpl (serial number, validity, key usage), has the CA
// sign it for a new key and returns the certificate with its key and
// parsed leaf.
func (p *PKI) issue(t testing.TB, tmpl *x509.Certificate) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = big.NewInt(p.serial.Add(1))
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// DialTLS returns a gNMI client of addr over TLS (1.2 or newer) trusting
// roots (nil: the system's) and presenting the client certificates given;
// the connection is closed when the test ends. See Dial for plaintext.
func DialTLS(t testing.TB, addr string, roots *x509.CertPool, certs ...tls.Certificate) gpb.GNMIClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12,
	})))
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return gpb.NewGNMIClient(conn)
}
