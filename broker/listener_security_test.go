package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/sasl"
)

// lockedBuffer is a log sink goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A node warns once at start-up for each listener that accepts unsigned
// OAUTHBEARER tokens, naming it, and refuses to start when an OAUTHBEARER
// listener can check no token.
func TestUnsignedOAuthBearerListeners(t *testing.T) {
	base := func(c *config.Config) {
		c.Listeners = "PLAINTEXT://127.0.0.1:0,DEV://127.0.0.1:0,SECURE://127.0.0.1:0"
		c.ListenerSecurityProtocolMap = "PLAINTEXT:PLAINTEXT,DEV:SASL_PLAINTEXT,SECURE:SASL_PLAINTEXT"
		c.InterBrokerListenerName = "PLAINTEXT"
		c.SASL.EnabledMechanisms = "OAUTHBEARER"
		c.SASL.Listener = map[string]string{
			"listener.name.dev.oauthbearer.sasl.server.callback.handler.class": sasl.OAuthUnsecuredHandler,
		}
	}

	var log lockedBuffer
	cfg := config.Default()
	cfg.LogDirs = filepath.Join(t.TempDir(), "data")
	base(&cfg)
	// SECURE checks signed tokens against its own JWKS (never reachable
	// here: no token is presented).
	cfg.SASL.Listener["listener.name.secure.oauthbearer.sasl.oauthbearer.jwks.endpoint.url"] = "http://127.0.0.1:1/jwks.json"
	b, err := New(cfg, zerolog.New(&log))
	if err != nil {
		t.Fatal(err)
	}
	b.Start()
	defer b.Close()
	var warnings []map[string]any
	for line := range strings.SplitSeq(log.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["level"] == "warn" && strings.Contains(fmt.Sprint(m["message"]), "unsigned") {
			warnings = append(warnings, m)
		}
	}
	if len(warnings) != 1 || warnings[0]["listener"] != "DEV" {
		t.Errorf("unsigned-token warnings %v, want one naming DEV", warnings)
	}

	// SECURE left to the broker-wide mechanisms: OAUTHBEARER with no way
	// to check a token.
	cfg = config.Default()
	cfg.LogDirs = filepath.Join(t.TempDir(), "data")
	base(&cfg)
	if _, err := New(cfg, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "listener SECURE: OAUTHBEARER: it can neither check signed tokens") {
		t.Errorf("New: %v, want a refusal naming SECURE", err)
	}
}
