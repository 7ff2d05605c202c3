package sidecartest

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
)

func TestPKI(t *testing.T) {
	p, other, dir := NewPKI(t), NewPKI(t), t.TempDir()
	verify := func(cert tls.Certificate, roots *x509.CertPool, name string, usage x509.ExtKeyUsage) error {
		_, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
	srv := p.Server(t, "sidecar.test")
	for _, name := range []string{"127.0.0.1", "::1", "localhost", "sidecar.test"} {
		if err := verify(srv, p.Pool(), name, x509.ExtKeyUsageServerAuth); err != nil {
			t.Errorf("the server certificate for %s: %v", name, err)
		}
	}
	if verify(srv, p.Pool(), "other.test", x509.ExtKeyUsageServerAuth) == nil {
		t.Error("the server certificate verifies for other.test")
	}
	if verify(srv, other.Pool(), "localhost", x509.ExtKeyUsageServerAuth) == nil {
		t.Error("another CA's pool trusts the server certificate")
	}
	c := p.Client(t, "ops-bot")
	if err := verify(c, p.Pool(), "", x509.ExtKeyUsageClientAuth); err != nil || c.Leaf.Subject.CommonName != "ops-bot" {
		t.Errorf("the client certificate: %v, common name %q", err, c.Leaf.Subject.CommonName)
	}
	if c.Leaf.SerialNumber.Cmp(srv.Leaf.SerialNumber) == 0 {
		t.Error("two certificates share a serial number")
	}

	certFile, keyFile := WriteCert(t, dir, "ops-bot", c)
	loaded, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil || !loaded.Leaf.Equal(c.Leaf) {
		t.Errorf("the written certificate: %v", err)
	}
	caPEM, err := os.ReadFile(p.WriteCA(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("the written CA is not a PEM certificate")
	}
	if err := verify(c, roots, "", x509.ExtKeyUsageClientAuth); err != nil {
		t.Errorf("the client certificate against the written CA: %v", err)
	}
}
