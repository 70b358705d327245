package config

import (
	"maps"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/controller"
)

// sslKeyDocs documents the ssl.* keys Fjord acts on (tlsconf.Keys); each
// applies broker-wide and, as listener.name.<name>.<key>, to one listener.
var sslKeyDocs = []struct{ name, def, doc string }{
	{"ssl.keystore.type", "", "Default JKS. Format of the keystore: JKS, PKCS12 or PEM. A JKS or PKCS12 file is read whichever of the two it is, as Java does."},
	{"ssl.keystore.location", "", "The keystore file of a TLS listener (its certificate chain and private key); polled for changes (fjord.ssl.reload.check.interval.ms)."},
	{"ssl.keystore.password", "", "Password of the keystore file."},
	{"ssl.key.password", "", "Password of the private key in the keystore; empty = the keystore's password. Encrypted PEM keys are refused."},
	{"ssl.keystore.key", "", "With ssl.keystore.type=PEM: the private key (unencrypted PKCS#8, PKCS#1 or SEC 1 PEM) inline."},
	{"ssl.keystore.certificate.chain", "", "With ssl.keystore.type=PEM: the certificate chain (PEM) inline, leaf first."},
	{"ssl.truststore.type", "", "Default JKS. Format of the truststore: JKS, PKCS12 or PEM."},
	{"ssl.truststore.location", "", "The truststore file: the CAs client certificates (and, for replication, other brokers' certificates) must chain to. Unset = the system's roots."},
	{"ssl.truststore.password", "", "Password of the truststore file."},
	{"ssl.truststore.certificates", "", "With ssl.truststore.type=PEM: the trusted certificates (PEM) inline."},
	{"ssl.client.auth", "", "Default none. none, requested (a client certificate is verified if given) or required."},
	{"ssl.principal.mapping.rules", "", "Default DEFAULT. Maps a client certificate's distinguished name (RFC 2253, \"CN=...,OU=...\") to a user: RULE:pattern/replacement/[LU] rules, comma separated, first match wins; DEFAULT is the whole DN. A certificate no rule matches fails the handshake."},
	{"ssl.enabled.protocols", "", "Default TLSv1.2,TLSv1.3. TLS versions served: TLSv1, TLSv1.1, TLSv1.2, TLSv1.3 (a contiguous range)."},
	{"ssl.cipher.suites", "", "Cipher suites (JSSE/IANA names) for TLS 1.2 and below; empty = Go's defaults. A name Go does not serve stops start-up; with TLSv1.3 enabled the three TLS 1.3 suites must all be listed, as Go always serves them."},
	{"ssl.endpoint.identification.algorithm", "", "Default https. https: this broker checks the host name in other brokers' certificates when it replicates over TLS; empty: only the chain is checked."},
}

// sslKeys are the table rows of the ssl.* keys. A change of a store file
// is picked up without a restart (fjord.ssl.reload.check.interval.ms), and
// so is a dynamic change of a broker's own ssl.* keys (broker/tlsconf/dynamic.go).
func sslKeys() []Key {
	out := make([]Key, 0, len(sslKeyDocs))
	for _, k := range sslKeyDocs {
		out = append(out, Key{Name: k.name, Def: k.def, Doc: k.doc, Set: setSSL(k.name), Dynamic: true})
	}
	return out
}

// setSSL stores a ssl.* value in Config.SSL, copying the map so that
// configurations never share one.
func setSSL(key string) func(*Config, string) error {
	return func(c *Config, v string) error {
		m := maps.Clone(c.SSL)
		if m == nil {
			m = map[string]string{}
		}
		m[key] = strings.TrimSpace(v)
		c.SSL = m
		return nil
	}
}

// SetListenerSSL stores a listener.name.<name>.ssl.* value (cmd/fjord:
// these keys are outside the table, which lists exact names).
func (c *Config) SetListenerSSL(key, value string) { _ = setSSL(key)(c, value) }

// checkSSLConfig judges a dynamic ssl.* key: per broker only. Whether the
// stores load is the named broker's to find: it refuses the change when
// it receives it (the broker's checkDynamicSSL) and, when the change
// comes through another node, keeps serving its certificate if they do
// not.
func checkSSLConfig(res controller.ConfigResource, key string) error {
	if res.Name == "" {
		return controller.ConfigError(kerr.InvalidConfig, "%s: TLS settings may be changed per broker only (the broker resource named by its node id), as in Kafka: a keystore belongs to one node", key)
	}
	return nil
}
