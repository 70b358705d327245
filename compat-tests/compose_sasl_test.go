package compattests

// The SASL part of the compose tests: the clients' credentials, taken from
// the JAAS file the example gives its broker, and the check that the
// broker refuses anyone else.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// composeSASLFlags are composeclient's --sasl-* flags for fx (none without
// saslUser): the user's password is its user_<name>="..." option in the
// fixture's JAAS file, so the clients use exactly the example's
// credentials.
func composeSASLFlags(t *testing.T, fx composeFixture) []string {
	t.Helper()
	if fx.saslUser == "" {
		return nil
	}
	path := filepath.Join("testdata", "compose", fx.name, fx.jaas)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the fixture's JAAS file: %v", err)
	}
	m := regexp.MustCompile(`(?m)^\s*user_` + regexp.QuoteMeta(fx.saslUser) + `\s*=\s*"([^"]*)"`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("%s has no user_%s=\"...\" option", path, fx.saslUser)
	}
	return []string{"--sasl-mechanism", fx.saslMechanism, "--sasl-user", fx.saslUser, "--sasl-password", string(m[1])}
}

// placeFixtureFile copies testdata/compose/<name>/<src> to dst (a path in
// the temp layout), readable by the container whatever its user.
func placeFixtureFile(t *testing.T, name, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(dst, filepath.Join("testdata", "compose", name, src), 0o644); err != nil {
		t.Fatalf("placing fixture file %s: %v", src, err)
	}
}

// authcheckJSON is composeclient's authcheck result.
type authcheckJSON struct {
	OK            bool   `json:"ok"`
	Error         string `json:"error"`
	WrongPassword string `json:"wrong_password_error"`
	NoSASL        string `json:"no_sasl_error"`
}

// testComposeAuth checks, on the compose network, that the in-network
// SASL listener serves the example's credentials and nothing else: the
// same user with a wrong password gets SASL_AUTHENTICATION_FAILED and a
// client without SASL is not served.
func testComposeAuth(t *testing.T, p *composeProject, images *composeImages, fx composeFixture, sasl []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	first := strings.Split(fx.bootstrap, ",")[0]
	c := p.startClient(images.client, "authcheck", append([]string{"authcheck", "--bootstrap", first, "--timeout", "60s"}, sasl...)...)
	werr := c.wait(ctx)
	r := &authcheckJSON{}
	jerr := json.Unmarshal(c.stdout.Bytes(), r)
	if werr != nil || jerr != nil || !r.OK {
		t.Fatalf("authcheck on %s failed: %v\nresult: %s\nclient stderr:\n%s",
			first, firstErr(werr, jerr, r.Error), strings.TrimSpace(c.stdout.String()), lastLines(c.stderrText(), 20))
	}
	t.Logf("authcheck on %s: %s served; a wrong password refused (%s); no SASL refused (%s)", first, fx.saslUser, r.WrongPassword, r.NoSASL)
}
