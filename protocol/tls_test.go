package protocol

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"
)

// selfSigned is a throwaway server certificate for handshakes on loopback.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}

// A failed handshake is quiet (debug) when the peer sent nothing or hung
// up mid-way (a port probe, the active controller's listener watch, a
// client closed while dialling), and worth an info line when it sent
// something TLS refuses.
func TestServerHandshakeQuiet(t *testing.T) {
	cfg := &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}
	for _, tc := range []struct {
		what   string
		client func(c net.Conn)
		silent bool
	}{
		{"connect and close", func(c net.Conn) { c.Close() }, true},
		{"plaintext Kafka bytes", func(c net.Conn) { c.Write([]byte{0, 0, 0, 20, 0, 18, 0, 3, 0, 0, 0, 1}); c.Close() }, false},
		{"a client that does not trust the certificate", func(c net.Conn) {
			_ = tls.Client(c, &tls.Config{ServerName: "localhost"}).Handshake()
			c.Close()
		}, false},
	} {
		srv, cli := net.Pipe()
		go tc.client(cli)
		_, silent, err := ServerHandshake(srv, cfg)
		srv.Close()
		if err == nil {
			t.Errorf("%s: handshake succeeded", tc.what)
			continue
		}
		if silent != tc.silent {
			t.Errorf("%s: silent %v, want %v (%v)", tc.what, silent, tc.silent, err)
		}
	}
}
