package main

// The serve options about who may talk to the sidecar (northbound TLS,
// mTLS, the loopback rule, authorization) and how the sidecar proves
// itself to the device (the device password): the files they name are
// read here; package sidecar serves with what they hold. See
// docs/security.md.

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gnmi-sidecar/gnmi-sidecar/authz"
)

// securityConfig holds the serve options about who may talk to the
// sidecar and how the sidecar proves itself to the device.
type securityConfig struct {
	tlsCert            string
	tlsKey             string
	tlsClientCA        string
	insecure           bool
	authzFile          string
	devicePasswordFile string

	// Set by prepare (checkListen).
	prepared    bool
	nonLoopback bool // --listen is not a loopback address
	serverTLS   *tls.Config
	policy      *authz.Policy
	password    string // the device password
}

func (c *securityConfig) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate (chain) the sidecar serves gNMI with (TLS 1.2 or newer); needs --tls-key")
	f.StringVar(&c.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&c.tlsClientCA, "tls-client-ca", "", "PEM CA certificate(s): require a client certificate signed by one of them (mTLS); needs --tls-cert")
	f.BoolVar(&c.insecure, "insecure", false, "allow plaintext gNMI on a non-loopback --listen address (without it, such an address needs --tls-cert)")
	f.StringVar(&c.authzFile, "authz-file", "", "YAML file of client roles (read, write, admin) by username and by certificate common name; off when empty: every client is admin (docs/security.md)")
	f.StringVar(&c.devicePasswordFile, "device-password-file", "", "file holding the password sent to the device (trailing newline ignored); or $"+passwordEnv+", not both")
}

// checkListen refuses a listen address the security options do not allow:
// a non-loopback address without TLS, unless --insecure. It also loads the
// TLS and authorization files and reads the device password file, so that
// a bad one stops the start before anything else happens.
func (c *securityConfig) checkListen(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	c.nonLoopback = !isLoopback(host)
	if err := c.prepare(); err != nil {
		return err
	}
	if c.nonLoopback && c.serverTLS == nil && !c.insecure {
		return fmt.Errorf("--listen %s is not a loopback address: serve TLS (--tls-cert/--tls-key) or pass --insecure to allow plaintext", listen)
	}
	return nil
}

// isLoopback reports whether a listen host is loopback only: "localhost",
// 127.0.0.0/8 or ::1. An empty host and 0.0.0.0 or :: (every address) are
// not; neither is any other name (names are not resolved).
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	host, _, _ = strings.Cut(host, "%") // an IPv6 zone
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// prepare loads the TLS files and the authorization file once, and checks
// the device password can be read.
func (c *securityConfig) prepare() error {
	if c.prepared {
		return nil
	}
	password, err := c.readDevicePassword()
	if err != nil {
		return err
	}
	cfg, err := c.loadServerTLS()
	if err != nil {
		return err
	}
	var policy *authz.Policy
	if c.authzFile != "" {
		data, err := os.ReadFile(c.authzFile)
		if err != nil {
			return fmt.Errorf("--authz-file: %w", err)
		}
		policy, err = authz.ParsePolicy(data)
		if err != nil {
			return fmt.Errorf("--authz-file %s: %w", c.authzFile, err)
		}
	}
	c.serverTLS, c.policy, c.password, c.prepared = cfg, policy, password, true
	return nil
}

// loadServerTLS builds the northbound TLS configuration, nil for
// plaintext. Every error names the flag of the file at fault.
func (c *securityConfig) loadServerTLS() (*tls.Config, error) {
	if c.tlsCert == "" && c.tlsKey == "" {
		if c.tlsClientCA != "" {
			return nil, errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates are checked over TLS")
		}
		return nil, nil
	}
	if c.tlsCert == "" || c.tlsKey == "" {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	certPEM, err := os.ReadFile(c.tlsCert)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert: %w", err)
	}
	if !hasPEM(certPEM, "CERTIFICATE") {
		return nil, fmt.Errorf("--tls-cert %s: no PEM certificate in it", c.tlsCert)
	}
	keyPEM, err := os.ReadFile(c.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-key %s (the key of --tls-cert %s): %w", c.tlsKey, c.tlsCert, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if c.tlsClientCA != "" {
		pool, err := loadCertPool("--tls-client-ca", c.tlsClientCA)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// hasPEM reports whether data holds a PEM block of type typ.
func hasPEM(data []byte, typ string) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if b.Type == typ {
			return true
		}
	}
}

// logSecurity logs how clients are served (TLS, mTLS) and warns about
// what the options leave open.
func (c *securityConfig) logSecurity(log *slog.Logger) {
	if c.serverTLS != nil {
		if leaf := c.serverTLS.Certificates[0].Leaf; leaf != nil && time.Now().After(leaf.NotAfter) {
			log.Warn("the --tls-cert certificate has expired: clients will refuse it", "not_after", leaf.NotAfter)
		}
		log.Info("serving gNMI over TLS", "mtls", c.serverTLS.ClientCAs != nil)
	} else if c.nonLoopback {
		log.Warn("serving plaintext gNMI on a non-loopback address (--insecure): anyone on the network can read and change the configuration passing through")
	}
	if c.policy == nil {
		if c.nonLoopback {
			who := "every client that can connect"
			if c.serverTLS != nil && c.serverTLS.ClientCAs != nil {
				who = "every client with a certificate from --tls-client-ca"
			}
			log.Warn("no --authz-file: " + who + " has admin rights (Set, rollback, commit-confirmed)")
		}
		return
	}
	log.Info("authorization on", "authz_file", c.authzFile, "users", len(c.policy.Users),
		"certificates", len(c.policy.Certificates), "default_role", c.policy.DefaultRole.String())
	if c.serverTLS == nil && len(c.policy.Users) > 0 {
		log.Warn("--authz-file lists users but gNMI is served without TLS: their passwords travel in plaintext")
	}
	if (c.serverTLS == nil || c.serverTLS.ClientCAs == nil) && len(c.policy.Certificates) > 0 {
		log.Warn("--authz-file lists certificates but without --tls-client-ca no client certificate is asked for")
	}
}

// devicePassword returns the password the sidecar sends to the device:
// the content of --device-password-file (trailing newlines trimmed) or
// $GNMI_SIDECAR_DEVICE_PASSWORD, never both. No error carries it.
func (c *securityConfig) devicePassword() (string, error) {
	if err := c.prepare(); err != nil {
		return "", err
	}
	return c.password, nil
}

// readDevicePassword reads the device password from --device-password-file
// or $GNMI_SIDECAR_DEVICE_PASSWORD.
func (c *securityConfig) readDevicePassword() (string, error) {
	env := os.Getenv(passwordEnv)
	if c.devicePasswordFile == "" {
		return env, nil
	}
	if env != "" {
		return "", fmt.Errorf("--device-password-file and $%s are both set: give the device password one way", passwordEnv)
	}
	data, err := os.ReadFile(c.devicePasswordFile)
	if err != nil {
		return "", fmt.Errorf("--device-password-file: %w", err)
	}
	pw := strings.TrimRight(string(data), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("--device-password-file %s is empty", c.devicePasswordFile)
	}
	return pw, nil
}
