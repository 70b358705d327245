package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apache/kafka's TLS variables: store file names under the secrets
// directory, passwords read from credentials files there; and per-listener
// ssl keys kept apart from the broker-wide ones.
func TestSSLImageEnv(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "kafka_keystore_creds"), []byte("abcdefgh\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "kafka_ssl_key_creds"), []byte("keypass"), 0o600)
	env := []string{
		"FJORD_SECRETS_DIR=" + dir,
		"KAFKA_LISTENERS=SSL://:9093,CONTROLLER://:29093,SSL-INTERNAL://:19093",
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=SSL:SSL,CONTROLLER:PLAINTEXT,SSL-INTERNAL:SSL",
		"KAFKA_INTER_BROKER_LISTENER_NAME=SSL-INTERNAL",
		"KAFKA_SSL_KEYSTORE_LOCATION=/elsewhere.jks",
		"KAFKA_SSL_KEYSTORE_FILENAME=kafka01.keystore.jks",
		"KAFKA_SSL_KEYSTORE_CREDENTIALS=kafka_keystore_creds",
		"KAFKA_SSL_KEY_CREDENTIALS=kafka_ssl_key_creds",
		"KAFKA_SSL_CLIENT_AUTH=required",
		"KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM=",
		"KAFKA_LISTENER_NAME_SSL-INTERNAL_SSL_CLIENT_AUTH=none",
	}
	l, err := loadConfig(nil, env)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ssl.keystore.location":                      filepath.Join(dir, "kafka01.keystore.jks"),
		"ssl.keystore.password":                      "abcdefgh",
		"ssl.key.password":                           "keypass",
		"ssl.client.auth":                            "required",
		"ssl.endpoint.identification.algorithm":      "",
		"listener.name.ssl-internal.ssl.client.auth": "none",
	}
	for k, v := range want {
		if got, ok := l.cfg.SSL[k]; !ok || got != v {
			t.Errorf("%s = %q (set %v), want %q", k, got, ok, v)
		}
	}
	if p := l.cfg.ListenerProtocol("SSL-INTERNAL"); p != "SSL" {
		t.Errorf("SSL-INTERNAL protocol %s", p)
	}

	_, err = loadConfig(nil, append(env, "KAFKA_SSL_TRUSTSTORE_CREDENTIALS=missing_creds"))
	if err == nil || !strings.Contains(err.Error(), "env KAFKA_SSL_TRUSTSTORE_CREDENTIALS: the credentials file") {
		t.Errorf("a missing credentials file: %v", err)
	}
}
