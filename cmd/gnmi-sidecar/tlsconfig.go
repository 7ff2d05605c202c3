package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// clientTLS is the TLS of a gNMI client the binary makes: the sidecar's
// towards the device (the --device-* options) and the operator commands'
// towards the sidecar (the --tls-* ones). The options share their names
// after prefix: <prefix>ca, <prefix>cert, <prefix>key, <prefix>server-name,
// <prefix>skip-verify; on is the plain switch (--device-tls, --tls).
type clientTLS struct {
	prefix                    string
	on                        bool
	ca, cert, key, serverName string
	skipVerify                bool
}

// config builds the TLS configuration, nil for plaintext. Errors name the
// option at fault.
func (c clientTLS) config() (*tls.Config, error) {
	if !c.on && c.ca == "" && c.cert == "" && c.key == "" && c.serverName == "" && !c.skipVerify {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.serverName, InsecureSkipVerify: c.skipVerify} //nolint:gosec // explicit operator choice
	if c.ca != "" {
		pool, err := loadCertPool("--"+c.prefix+"ca", c.ca)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	certFlag, keyFlag := "--"+c.prefix+"cert", "--"+c.prefix+"key"
	if (c.cert == "") != (c.key == "") {
		return nil, fmt.Errorf("%s and %s go together", certFlag, keyFlag)
	}
	if c.cert != "" {
		cert, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", certFlag, keyFlag, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// loadCertPool reads the PEM CA certificates of option flag from path.
func loadCertPool(flag, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it", flag, path)
	}
	return pool, nil
}
