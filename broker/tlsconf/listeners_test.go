package tlsconf

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"software.sslmate.com/src/go-pkcs12"
)

// p12 writes p's PKCS12 keystore (password pw) to dir/name and returns
// its path.
func p12(t *testing.T, dir, name string, p *pair) string {
	t.Helper()
	data, err := pkcs12.Modern.Encode(p.key, p.cert, nil, "pw")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func served(src func() *Source) string { return src().Server().Certificates[0].Leaf.Subject.CommonName }

// Open loads every TLS listener's own settings (a listener.name.<l>.ssl.*
// key over the broker-wide one), the client listeners first; a store
// that does not load stops it with an error naming the listener.
func TestListenersOpen(t *testing.T) {
	dir := t.TempDir()
	ca := newCert(t, pkix.Name{CommonName: "fjord-ca"}, nil, true)
	wide := p12(t, dir, "wide.p12", newCert(t, pkix.Name{CommonName: "wide"}, ca, false))
	own := p12(t, dir, "own.p12", newCert(t, pkix.Name{CommonName: "own"}, ca, false))
	ssl := map[string]string{"ssl.keystore.location": wide, "ssl.keystore.password": "pw", "ssl.keystore.type": "PKCS12",
		"listener.name.internal.ssl.keystore.location": own}
	var logs bytes.Buffer
	l, err := Open(ListenerConfig{SSL: ssl, Client: []string{"SSL", "INTERNAL"}, Controller: "CONTROLLER", ControllerTLS: true, Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"SSL": "wide", "INTERNAL": "own"} {
		cfg, principal := l.Server(name)
		if cfg == nil || principal == nil || cfg().Certificates[0].Leaf.Subject.CommonName != want {
			t.Errorf("listener %s: not served with %s", name, want)
		}
		if l.Dialer(name) == nil {
			t.Errorf("listener %s: no TLS dialer", name)
		}
	}
	if cfg, principal := l.Server("PLAINTEXT"); cfg != nil || principal != nil || l.Dialer("PLAINTEXT") != nil {
		t.Error("a listener that is not TLS has TLS hooks")
	}
	if l.ControllerServer() == nil || l.ControllerPrincipal() == nil || l.ControllerVerifiesClients() {
		t.Error("controller listener: want TLS without ssl.client.auth=required")
	}
	if got := strings.Count(logs.String(), `"message":"TLS listener"`); got != 2 {
		t.Errorf("%d TLS listener lines, want 2:\n%s", got, logs.String())
	}
	if len(l.Watchers(context.Background(), false)) != 2 || len(l.Watchers(context.Background(), true)) != 1 {
		t.Error("want one watcher per TLS listener")
	}

	ssl["listener.name.internal.ssl.keystore.location"] = filepath.Join(dir, "missing.p12")
	if _, err := Open(ListenerConfig{SSL: ssl, Client: []string{"SSL", "INTERNAL"}, Log: zerolog.Nop()}); err == nil || !strings.Contains(err.Error(), "listener INTERNAL") {
		t.Errorf("a missing store: %v, want an error naming INTERNAL", err)
	}
	ssl["listener.name.controller.ssl.client.auth"] = "required"
	ssl["ssl.truststore.location"] = p12(t, dir, "trust.p12", ca)
	ssl["ssl.truststore.password"], ssl["ssl.truststore.type"] = "pw", "PKCS12"
	l, err = Open(ListenerConfig{SSL: ssl, Controller: "CONTROLLER", ControllerTLS: true, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if !l.ControllerVerifiesClients() {
		t.Error("controller listener with ssl.client.auth=required: clients not verified")
	}
}

// A nil *Listeners is a node without TLS listeners.
func TestListenersNil(t *testing.T) {
	var l *Listeners
	if cfg, p := l.Server("SSL"); cfg != nil || p != nil || l.Dialer("SSL") != nil || l.ControllerServer() != nil ||
		l.ControllerPrincipal() != nil || l.ControllerVerifiesClients() || len(l.Watchers(context.Background(), true)) != 0 {
		t.Error("a nil Listeners has TLS hooks")
	}
	if err := l.CheckDynamic(map[string]string{"ssl.keystore.location": "/nonexistent"}); err != nil {
		t.Error(err)
	}
	l.Reconfigure(map[string]string{"ssl.keystore.location": "/nonexistent"})
}

// Dynamic ssl.* keys (own and listener-prefixed) over the static ones:
// CheckDynamic refuses settings that do not load, naming the listener;
// Reconfigure serves new connections with settings that do and keeps the
// old certificate otherwise, or when a password does not decrypt.
func TestListenersDynamic(t *testing.T) {
	for key, want := range map[string]bool{"ssl.keystore.location": true, "listener.name.client.ssl.key.password": true,
		"listener.name.client.sasl.jaas.config": false, "ssl.unknown": false, "log.retention.ms": false} {
		if IsKey(key) != want {
			t.Errorf("IsKey(%q) = %v", key, !want)
		}
	}
	dir := t.TempDir()
	ca := newCert(t, pkix.Name{CommonName: "fjord-ca"}, nil, true)
	first := p12(t, dir, "first.p12", newCert(t, pkix.Name{CommonName: "first"}, ca, false))
	second := p12(t, dir, "second.p12", newCert(t, pkix.Name{CommonName: "second"}, ca, false))
	var logs bytes.Buffer
	var decryptErr error
	l, err := Open(ListenerConfig{
		SSL:    map[string]string{"ssl.keystore.location": first, "ssl.keystore.password": "pw", "ssl.keystore.type": "PKCS12"},
		Client: []string{"SSL", "OTHER"}, Controller: "CONTROLLER", ControllerTLS: true, Log: zerolog.New(&logs),
		Decrypt: func(m map[string]string) (map[string]string, error) { return maps.Clone(m), decryptErr },
	})
	if err != nil {
		t.Fatal(err)
	}
	src := func(name string) func() *Source { return func() *Source { return l.all()[name] } }

	bad := map[string]string{"listener.name.other.ssl.keystore.location": filepath.Join(dir, "missing.p12")}
	if err := l.CheckDynamic(bad); err == nil || !strings.Contains(err.Error(), "listener OTHER") {
		t.Errorf("CheckDynamic of a missing store: %v, want an error naming OTHER", err)
	}
	if err := l.CheckDynamic(map[string]string{"ssl.keystore.location": " " + second + " "}); err != nil {
		t.Errorf("CheckDynamic of a good store: %v", err)
	}
	l.Reconfigure(bad)
	if served(src("OTHER")) != "first" || !strings.Contains(logs.String(), "dynamic TLS settings do not load") {
		t.Errorf("a store that does not load: OTHER serves %s\n%s", served(src("OTHER")), logs.String())
	}

	decryptErr = errors.New("no secret")
	l.Reconfigure(map[string]string{"listener.name.ssl.ssl.keystore.location": second})
	if served(src("SSL")) != "first" || !strings.Contains(logs.String(), "a stored password does not decrypt") {
		t.Errorf("a password that does not decrypt: SSL serves %s\n%s", served(src("SSL")), logs.String())
	}
	decryptErr = nil
	l.Reconfigure(map[string]string{"listener.name.ssl.ssl.keystore.location": second})
	for name, want := range map[string]string{"SSL": "second", "OTHER": "first", "CONTROLLER": "first"} {
		if got := served(src(name)); got != want {
			t.Errorf("after a change of SSL's keystore, %s serves %s, want %s", name, got, want)
		}
	}
}

// A failing dial to a peer is logged once when it starts failing (again
// when the error changes) and once when it works again; a cancelled one
// is not a failure.
func TestDialStateLogsChanges(t *testing.T) {
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	var s dialState
	bad, worse := errors.New("x509: unknown authority"), errors.New("connection refused")
	for _, err := range []error{bad, bad, context.Canceled, bad, worse, worse, nil, nil} {
		s.note(log, "INTERNAL", "10.0.0.1:9093", err)
	}
	if n := strings.Count(logs.String(), "failed; retrying"); n != 2 {
		t.Errorf("%d failure lines, want 2:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "works again"); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, logs.String())
	}
}
