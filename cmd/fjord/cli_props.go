package main

// Client properties: how a client subcommand connects to a secured
// cluster. kcat's `-X key=value` and a properties file (kcat's -F, the
// Kafka tools' --command-config) fill one table of librdkafka's property
// names, applied in command-line order (a later value wins); clientProps
// turns it into franz-go options (TLS, SASL, the client id). A key it
// does not know is a usage error naming it, as kcat refuses an unknown
// property, rather than a setting silently dropped.

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/fjordlog/fjord/broker/sasl"
)

// clientKeys are the properties the client subcommands take, with what
// each means; aliases name the key they stand for.
var clientKeys = map[string]string{
	"security.protocol":                     "PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL",
	"sasl.mechanism":                        "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
	"sasl.username":                         "the SASL user",
	"sasl.password":                         "the SASL password",
	"sasl.jaas.config":                      "a Java client's login module (PlainLoginModule or ScramLoginModule): its username and password",
	"ssl.ca.location":                       "PEM file of the CA certificates the brokers' certificates must chain to (default: the system's)",
	"ssl.certificate.location":              "PEM file of the client's certificate (and its chain), for brokers that ask for one",
	"ssl.key.location":                      "PEM file of the client's private key",
	"ssl.key.password":                      "the password of an encrypted ssl.key.location (legacy PEM encryption)",
	"ssl.keystore.location":                 "PKCS#12 file of the client's certificate and key (instead of the two PEM files)",
	"ssl.keystore.password":                 "the password of ssl.keystore.location",
	"enable.ssl.certificate.verification":   "true (default) or false: false accepts any broker certificate",
	"ssl.endpoint.identification.algorithm": "https (default): the broker's certificate must name its host; none (or empty): only its chain is checked",
	"client.id":                             "the client id brokers see (default fjord-cli)",
}

var clientAliases = map[string]string{"sasl.mechanisms": "sasl.mechanism"}

// javaHints answer the Java clients' names of keys this table has under
// librdkafka's name.
var javaHints = map[string]string{
	"ssl.truststore.location": "give the CA certificates as PEM with ssl.ca.location",
	"ssl.truststore.password": "give the CA certificates as PEM with ssl.ca.location",
	"ssl.truststore.type":     "give the CA certificates as PEM with ssl.ca.location",
	"ssl.keystore.type":       "ssl.keystore.location is read as PKCS#12; or give PEM files with ssl.certificate.location and ssl.key.location",
}

// clientProps are the properties given so far.
type clientProps struct {
	m map[string]string
}

func (p *clientProps) set(key, value string) error {
	key = strings.TrimSpace(key)
	if a, ok := clientAliases[key]; ok {
		key = a
	}
	if _, ok := clientKeys[key]; !ok {
		if h, ok := javaHints[key]; ok {
			return fmt.Errorf("client property %q is not supported: %s", key, h)
		}
		return fmt.Errorf("unknown client property %q (known: %s)", key, strings.Join(sortedKeys(clientKeys), ", "))
	}
	if p.m == nil {
		p.m = map[string]string{}
	}
	p.m[key] = strings.TrimSpace(value)
	return nil
}

// setFlag takes one -X key=value.
func (p *clientProps) setFlag(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("%q is not key=value", kv)
	}
	return p.set(k, v)
}

// readFile takes the properties of a file (Java properties syntax, as
// kcat's -F and the Kafka tools' --command-config read them).
func (p *clientProps) readFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	props, err := parseProperties(string(data))
	if err != nil {
		return fmt.Errorf("%s:%w", path, err)
	}
	for _, pr := range props {
		if err := p.set(pr.key, pr.value); err != nil {
			return fmt.Errorf("%s:%d: %w", path, pr.line, err)
		}
	}
	return nil
}

func (p *clientProps) get(key string) string { return p.m[key] }

// options are the franz-go options the properties ask for; an error names
// the property at fault.
func (p *clientProps) options() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if id := p.get("client.id"); id != "" {
		opts = append(opts, kgo.ClientID(id))
	}
	proto := strings.ToUpper(p.get("security.protocol"))
	var useTLS, useSASL bool
	switch proto {
	case "", "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return nil, fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", p.get("security.protocol"))
	}
	// A TLS or SASL setting the protocol would not use is refused: a
	// connection in the clear where the user asked for credentials is
	// worse than an error.
	for _, k := range sortedKeys(p.m) { // the first in order, for a stable message
		if p.m[k] == "" {
			continue
		}
		if !useTLS && (strings.HasPrefix(k, "ssl.") || k == "enable.ssl.certificate.verification") {
			return nil, fmt.Errorf("%s is set but security.protocol is %s: use SSL or SASL_SSL", k, cmp.Or(proto, "PLAINTEXT"))
		}
		if !useSASL && strings.HasPrefix(k, "sasl.") {
			return nil, fmt.Errorf("%s is set but security.protocol is %s: use SASL_PLAINTEXT or SASL_SSL", k, cmp.Or(proto, "PLAINTEXT"))
		}
	}
	if useTLS {
		cfg, err := p.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if useSASL {
		m, err := p.saslMechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (p *clientProps) saslMechanism() (kgosasl.Mechanism, error) {
	mech := strings.ToUpper(p.get("sasl.mechanism"))
	user, pass := p.get("sasl.username"), p.get("sasl.password")
	if jaas := p.get("sasl.jaas.config"); jaas != "" {
		if user != "" || pass != "" {
			return nil, errors.New("sasl.jaas.config and sasl.username/sasl.password are both set: give one")
		}
		mods, err := sasl.ParseJAASConfig(jaas)
		if err != nil {
			return nil, fmt.Errorf("sasl.jaas.config: %w", err)
		}
		i := slices.IndexFunc(mods, func(m sasl.LoginModule) bool {
			return m.Class == sasl.PlainLoginModule || m.Class == sasl.ScramLoginModule
		})
		if i < 0 {
			return nil, fmt.Errorf("sasl.jaas.config: no %s or %s", sasl.PlainLoginModule, sasl.ScramLoginModule)
		}
		user, pass = mods[i].Options["username"], mods[i].Options["password"]
	}
	if mech == "" {
		return nil, errors.New("a SASL security.protocol needs sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
	}
	if user == "" {
		return nil, fmt.Errorf("sasl.mechanism %s needs sasl.username and sasl.password (or sasl.jaas.config)", mech)
	}
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("sasl.mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", p.get("sasl.mechanism"))
}

// tlsConfig is the TLS client configuration of the ssl.* properties. kgo
// sets the server name to each broker's host as it dials.
func (p *clientProps) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := p.get("ssl.ca.location"); ca != "" {
		data, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("ssl.ca.location: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("ssl.ca.location %s: no PEM certificate in it", ca)
		}
	}
	certLoc, keyLoc, ks := p.get("ssl.certificate.location"), p.get("ssl.key.location"), p.get("ssl.keystore.location")
	switch {
	case ks != "" && (certLoc != "" || keyLoc != ""):
		return nil, errors.New("ssl.keystore.location and ssl.certificate.location/ssl.key.location are both set: give one")
	case ks != "":
		cert, err := pkcs12Cert(ks, p.get("ssl.keystore.password"))
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore.location %s: %w", ks, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case certLoc != "" || keyLoc != "":
		if certLoc == "" || keyLoc == "" {
			return nil, errors.New("ssl.certificate.location and ssl.key.location go together")
		}
		cert, err := pemCert(certLoc, keyLoc, p.get("ssl.key.password"))
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	switch v := strings.ToLower(p.get("enable.ssl.certificate.verification")); v {
	case "", "true":
	case "false":
		cfg.InsecureSkipVerify = true //nolint:gosec // asked for with enable.ssl.certificate.verification=false
		return cfg, nil
	default:
		return nil, fmt.Errorf("enable.ssl.certificate.verification %q: want true or false", v)
	}
	switch v := strings.ToLower(p.get("ssl.endpoint.identification.algorithm")); {
	case v == "https" || (v == "" && !p.has("ssl.endpoint.identification.algorithm")):
	case v == "none" || v == "":
		// The chain is checked, the host name not: Go checks both or
		// neither, so the chain is verified here.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true //nolint:gosec // the chain is verified in VerifyConnection
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the broker sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	default:
		return nil, fmt.Errorf("ssl.endpoint.identification.algorithm %q: want https or none", v)
	}
	return cfg, nil
}

func (p *clientProps) has(key string) bool { _, ok := p.m[key]; return ok }

// pemCert reads the client's certificate chain and key; a key in the
// legacy encrypted PEM form (Proc-Type: 4,ENCRYPTED, as `openssl rsa
// -aes256` writes) is decrypted with pass.
func pemCert(certLoc, keyLoc, pass string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certLoc)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("ssl.certificate.location: %w", err)
	}
	keyPEM, err := os.ReadFile(keyLoc)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("ssl.key.location: %w", err)
	}
	for rest := keyPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		switch {
		case b.Type == "ENCRYPTED PRIVATE KEY":
			return tls.Certificate{}, fmt.Errorf("ssl.key.location %s: an encrypted PKCS#8 key cannot be read: decrypt it (openssl pkcs8 -in %s -out key.pem) or use ssl.keystore.location (PKCS#12)", keyLoc, keyLoc)
		case x509.IsEncryptedPEMBlock(b): //nolint:staticcheck // legacy PEM encryption is what ssl.key.password meets in the wild
			if pass == "" {
				return tls.Certificate{}, fmt.Errorf("ssl.key.location %s is encrypted: give ssl.key.password", keyLoc)
			}
			der, err := x509.DecryptPEMBlock(b, []byte(pass)) //nolint:staticcheck // as above
			if err == nil && !parsesAsKey(der) {
				// Legacy PEM encryption has no integrity check: a wrong
				// password passes its padding check about once in 256
				// tries and yields garbage.
				err = errors.New("x509: decryption password incorrect (the result is no private key)")
			}
			if err != nil {
				return tls.Certificate{}, fmt.Errorf("ssl.key.location %s: decrypting with ssl.key.password: %w", keyLoc, err)
			}
			keyPEM = pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: der})
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("ssl.certificate.location %s, ssl.key.location %s: %w", certLoc, keyLoc, err)
	}
	return cert, nil
}

// parsesAsKey reports whether der is a private key in one of the forms
// tls.X509KeyPair reads (PKCS#1, SEC 1 or PKCS#8).
func parsesAsKey(der []byte) bool {
	if _, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return true
	}
	if _, err := x509.ParseECPrivateKey(der); err == nil {
		return true
	}
	_, err := x509.ParsePKCS8PrivateKey(der)
	return err == nil
}

func pkcs12Cert(path, pass string) (tls.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, leaf, cas, err := pkcs12.DecodeChain(data, pass)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("PKCS#12 (wrong ssl.keystore.password?): %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
	for _, c := range cas {
		cert.Certificate = append(cert.Certificate, c.Raw)
	}
	return cert, nil
}
