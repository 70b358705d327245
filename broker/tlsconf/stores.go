package tlsconf

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// jksMagic starts a Java KeyStore file; jceksMagic Sun's JCEKS variant.
var (
	jksMagic   = []byte{0xfe, 0xed, 0xfe, 0xed}
	jceksMagic = []byte{0xce, 0xce, 0xce, 0xce}
)

// storeFormat is what a keystore file holds, whatever ssl.*.type says: a
// Java 9+ JVM reads a PKCS12 file configured as JKS and the reverse
// (keystore.type.compat), and keytool writes PKCS12 by default even to a
// file named .jks, so the bytes decide.
func storeFormat(data []byte, configured string) string {
	switch {
	case strings.EqualFold(configured, "PEM"):
		return "PEM"
	case bytes.HasPrefix(data, jksMagic):
		return "JKS"
	case bytes.HasPrefix(data, jceksMagic):
		return "JCEKS"
	}
	return "PKCS12"
}

// loadKeystore reads the listener's certificate and key. origin names the
// source in errors.
func loadKeystore(s Settings) (cert tls.Certificate, origin string, err error) {
	typ := strings.ToUpper(s.get("ssl.keystore.type", "JKS"))
	loc := s.get("ssl.keystore.location", "")
	if typ == "PEM" && s.get("ssl.keystore.key", "") != "" {
		origin = "ssl.keystore.key / ssl.keystore.certificate.chain"
		if loc != "" {
			return cert, origin, errors.New("ssl.keystore.location and ssl.keystore.key are both set: give one")
		}
		cert, err = pemCertificate([]byte(s.get("ssl.keystore.certificate.chain", "")), []byte(s.get("ssl.keystore.key", "")), s.get("ssl.key.password", ""))
		return cert, origin, err
	}
	if loc == "" {
		return cert, "ssl.keystore.location", errors.New("a TLS listener needs a keystore: set ssl.keystore.location (or, with ssl.keystore.type=PEM, ssl.keystore.key and ssl.keystore.certificate.chain)")
	}
	origin = "ssl.keystore.location " + loc
	data, err := os.ReadFile(loc)
	if err != nil {
		return cert, origin, err
	}
	storePass := s.get("ssl.keystore.password", "")
	keyPass := s.get("ssl.key.password", storePass)
	switch f := storeFormat(data, typ); f {
	case "PEM":
		cert, err = pemCertificate(data, data, keyPass)
	case "JKS":
		cert, err = jksCertificate(data, storePass, keyPass)
	case "PKCS12":
		cert, err = pkcs12Certificate(data, storePass)
	default:
		err = fmt.Errorf("a %s keystore cannot be read; convert it to PKCS12 (keytool -importkeystore -deststoretype PKCS12)", f)
	}
	return cert, origin, err
}

// loadTruststore reads the CAs that client (or, for inter-broker clients,
// server) certificates must chain to; nil = none configured (the system's
// roots apply, as the JVM's cacerts would).
func loadTruststore(s Settings) (*x509.CertPool, string, error) {
	typ := strings.ToUpper(s.get("ssl.truststore.type", "JKS"))
	loc := s.get("ssl.truststore.location", "")
	if inline := s.get("ssl.truststore.certificates", ""); inline != "" {
		origin := "ssl.truststore.certificates"
		if typ != "PEM" {
			return nil, origin, errors.New("ssl.truststore.certificates needs ssl.truststore.type=PEM")
		}
		if loc != "" {
			return nil, origin, errors.New("ssl.truststore.location and ssl.truststore.certificates are both set: give one")
		}
		certs, err := pemCertificates([]byte(inline))
		return pool(certs), origin, err
	}
	if loc == "" {
		return nil, "", nil
	}
	origin := "ssl.truststore.location " + loc
	data, err := os.ReadFile(loc)
	if err != nil {
		return nil, origin, err
	}
	pass := s.get("ssl.truststore.password", "")
	var certs []*x509.Certificate
	switch f := storeFormat(data, typ); f {
	case "PEM":
		certs, err = pemCertificates(data)
	case "JKS":
		certs, err = jksTrusted(data, pass)
	case "PKCS12":
		certs, err = pkcs12.DecodeTrustStore(data, pass)
		if err != nil {
			// A PKCS12 truststore may also hold a key entry with its chain.
			if _, leaf, cas, err2 := pkcs12.DecodeChain(data, pass); err2 == nil {
				certs, err = append([]*x509.Certificate{leaf}, cas...), nil
			}
		}
	default:
		err = fmt.Errorf("a %s truststore cannot be read; convert it to PKCS12", f)
	}
	if err == nil && len(certs) == 0 {
		err = errors.New("the truststore holds no certificate")
	}
	return pool(certs), origin, err
}

func pool(certs []*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// pemCertificate pairs the certificates of chainPEM with the key of keyPEM.
func pemCertificate(chainPEM, keyPEM []byte, keyPass string) (tls.Certificate, error) {
	var chain [][]byte
	var keyDER []byte
	for rest := chainPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			chain = append(chain, b.Bytes)
		}
	}
	for rest := keyPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		switch {
		case b.Type == "ENCRYPTED PRIVATE KEY" || x509.IsEncryptedPEMBlock(b): //nolint:staticcheck // only to name it
			return tls.Certificate{}, errors.New("the PEM private key is encrypted, which Fjord cannot decrypt: give it unencrypted (PKCS#8) or use a PKCS12 keystore")
		case strings.HasSuffix(b.Type, "PRIVATE KEY") && keyDER == nil:
			keyDER = b.Bytes
		}
	}
	if len(chain) == 0 {
		return tls.Certificate{}, errors.New("no PEM CERTIFICATE block found")
	}
	if keyDER == nil {
		return tls.Certificate{}, errors.New("no PEM PRIVATE KEY block found")
	}
	key, err := parseKey(keyDER)
	if err != nil {
		return tls.Certificate{}, err
	}
	return certificate(chain, key)
}

func pemCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block found")
	}
	return out, nil
}

// parseKey reads a DER private key in PKCS#8, PKCS#1 or SEC 1 form.
func parseKey(der []byte) (crypto.Signer, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
		return nil, fmt.Errorf("unsupported private key type %T", k)
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("the private key is neither PKCS#8, PKCS#1 nor SEC 1")
}

// certificate checks that key belongs to the chain's leaf.
func certificate(chain [][]byte, key crypto.Signer) (tls.Certificate, error) {
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate: %w", err)
	}
	type equaler interface{ Equal(crypto.PublicKey) bool }
	if pk, ok := key.Public().(equaler); !ok || !pk.Equal(leaf.PublicKey) {
		return tls.Certificate{}, errors.New("the private key does not match the first certificate of the chain")
	}
	return tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: leaf}, nil
}

func pkcs12Certificate(data []byte, pass string) (tls.Certificate, error) {
	key, leaf, cas, err := pkcs12.DecodeChain(data, pass)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("PKCS12 (wrong ssl.keystore.password?): %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return tls.Certificate{}, fmt.Errorf("unsupported private key type %T", key)
	}
	chain := [][]byte{leaf.Raw}
	for _, c := range cas {
		chain = append(chain, c.Raw)
	}
	return certificate(chain, signer)
}

func loadJKS(data []byte, pass string) (keystore.KeyStore, error) {
	ks := keystore.New(keystore.WithOrderedAliases())
	if err := ks.Load(bytes.NewReader(data), []byte(pass)); err != nil {
		return ks, fmt.Errorf("JKS (wrong password?): %w", err)
	}
	return ks, nil
}

// jksCertificate takes the first key entry by alias, as one key per
// keystore is Kafka's layout.
func jksCertificate(data []byte, storePass, keyPass string) (tls.Certificate, error) {
	ks, err := loadJKS(data, storePass)
	if err != nil {
		return tls.Certificate{}, err
	}
	aliases := ks.Aliases()
	slices.Sort(aliases)
	for _, a := range aliases {
		if !ks.IsPrivateKeyEntry(a) {
			continue
		}
		e, err := ks.GetPrivateKeyEntry(a, []byte(keyPass))
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("JKS key entry %q (wrong ssl.key.password?): %w", a, err)
		}
		key, err := parseKey(e.PrivateKey)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("JKS key entry %q: %w", a, err)
		}
		var chain [][]byte
		for _, c := range e.CertificateChain {
			chain = append(chain, c.Content)
		}
		if len(chain) == 0 {
			return tls.Certificate{}, fmt.Errorf("JKS key entry %q has no certificate", a)
		}
		return certificate(chain, key)
	}
	return tls.Certificate{}, errors.New("the JKS keystore holds no private key entry")
}

func jksTrusted(data []byte, pass string) ([]*x509.Certificate, error) {
	ks, err := loadJKS(data, pass)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for _, a := range ks.Aliases() {
		var raws [][]byte
		switch {
		case ks.IsTrustedCertificateEntry(a):
			e, err := ks.GetTrustedCertificateEntry(a)
			if err != nil {
				return nil, err
			}
			raws = [][]byte{e.Certificate.Content}
		case ks.IsPrivateKeyEntry(a):
			chain, err := ks.GetPrivateKeyEntryCertificateChain(a)
			if err != nil {
				return nil, err
			}
			for _, c := range chain {
				raws = append(raws, c.Content)
			}
		}
		for _, r := range raws {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return nil, fmt.Errorf("JKS entry %q: %w", a, err)
			}
			out = append(out, c)
		}
	}
	return out, nil
}
