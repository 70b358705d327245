package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// loadTLS is the client TLS configuration of -tls-ca, -tls-cert and
// -tls-key; the CA applies to -brokers only (a started fjord is plaintext).
func loadTLS(caPath, certPath, keyPath string) (*tls.Config, error) {
	ca, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("-tls-ca: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("-tls-ca %s: no PEM certificate", caPath)
	}
	cfg := &tls.Config{RootCAs: roots}
	if (certPath == "") != (keyPath == "") {
		return nil, errors.New("-tls-cert and -tls-key go together")
	}
	if certPath != "" {
		c, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}
