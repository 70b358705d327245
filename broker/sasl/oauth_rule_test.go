package sasl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Unsigned OAUTHBEARER tokens are accepted only on a listener whose own
// configuration asks for them; a listener that can check no token at all
// stops start-up with an error naming it (buildOAuth).
func TestOAuthBearerUnsignedOnlyWhereAsked(t *testing.T) {
	dir := t.TempDir()
	jaasFile := filepath.Join(dir, "jaas.conf")
	if err := os.WriteFile(jaasFile, []byte(`
dev.KafkaServer {
  `+OAuthLoginModule+` required unsecuredValidatorRequiredScope="kafka";
};
KafkaServer {
  `+OAuthLoginModule+` required unsecuredValidatorRequiredScope="kafka";
};
`), 0o600); err != nil {
		t.Fatal(err)
	}
	const jwks = "http://127.0.0.1:1/jwks.json" // fetched by Run, which no case calls
	const unsecuredOpt = OAuthLoginModule + ` required unsecuredValidatorAllowableClockSkewMs="1000";`
	tests := []struct {
		name     string
		s        Settings
		listener string
		want     string // "signed", "unsigned", or a text the refusal must hold
	}{
		{"nothing configured", Settings{}, "CLIENT",
			"listener CLIENT: OAUTHBEARER: it can neither check signed tokens (no sasl.oauthbearer.jwks.endpoint.url applies to it) nor was it told to accept unsigned ones"},
		{"the refusal names the fix", Settings{}, "CLIENT",
			"listener.name.client.oauthbearer.sasl.server.callback.handler.class=" + OAuthUnsecuredHandler},
		{"a login module without validator options", Settings{Listener: map[string]string{
			"listener.name.client.oauthbearer.sasl.jaas.config": OAuthLoginModule + ` required;`}}, "CLIENT", "listener CLIENT: OAUTHBEARER: it can neither"},
		{"the unsecured class", Settings{Listener: map[string]string{
			"listener.name.dev.oauthbearer.sasl.server.callback.handler.class": OAuthUnsecuredHandler}}, "DEV", "unsigned"},
		{"the unsecured class wins over a broker-wide JWKS", Settings{OAuth: map[string]string{"sasl.oauthbearer.jwks.endpoint.url": jwks},
			Listener: map[string]string{"listener.name.dev.oauthbearer.sasl.server.callback.handler.class": OAuthUnsecuredHandler}}, "DEV", "unsigned"},
		{"the listener's own validator options", Settings{Listener: map[string]string{
			"listener.name.dev.oauthbearer.sasl.jaas.config": unsecuredOpt}}, "DEV", "unsigned"},
		{"another listener's own validator options", Settings{Listener: map[string]string{
			"listener.name.dev.oauthbearer.sasl.jaas.config": unsecuredOpt}}, "CLIENT", "listener CLIENT: OAUTHBEARER: it can neither"},
		{"broker-wide validator options", Settings{JAASConfig: unsecuredOpt}, "CLIENT", "listener CLIENT: OAUTHBEARER: it can neither"},
		{"the JAAS file's listener section", Settings{JAASFile: jaasFile}, "DEV", "unsigned"},
		{"the JAAS file's shared section", Settings{JAASFile: jaasFile}, "CLIENT", "listener CLIENT: OAUTHBEARER: it can neither"},
		{"a broker-wide JWKS", Settings{OAuth: map[string]string{"sasl.oauthbearer.jwks.endpoint.url": jwks}}, "CLIENT", "signed"},
		{"a broker-wide JWKS over the listener's validator options", Settings{OAuth: map[string]string{"sasl.oauthbearer.jwks.endpoint.url": jwks},
			Listener: map[string]string{"listener.name.dev.oauthbearer.sasl.jaas.config": unsecuredOpt}}, "DEV", "signed"},
		{"the JWKS class without a URL", Settings{Listener: map[string]string{
			"listener.name.client.oauthbearer.sasl.server.callback.handler.class": OAuthValidatorHandler}}, "CLIENT", "set sasl.oauthbearer.jwks.endpoint.url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.s.EnabledMechanisms = "OAUTHBEARER"
			srv, err := NewServer(tt.s, tt.listener, nil, Hooks{})
			switch tt.want {
			case "signed", "unsigned":
				if err != nil {
					t.Fatal(err)
				}
				_, isUnsecured := srv.oauth.(*unsecuredValidator)
				if got := srv.AcceptsUnsigned(); got != (tt.want == "unsigned") || got != isUnsecured {
					t.Errorf("AcceptsUnsigned %v, validator %T, want %s", got, srv.oauth, tt.want)
				}
			default:
				if err == nil {
					t.Fatalf("accepted (validator %T)", srv.oauth)
				}
				if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "listener "+tt.listener) || strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q\n want one line naming listener %s and holding %q", err, tt.listener, tt.want)
				}
			}
		})
	}
}

// A listener without OAUTHBEARER needs no validator, whatever the others
// do.
func TestOAuthBearerRuleOnlyWhenEnabled(t *testing.T) {
	srv, err := NewServer(Settings{EnabledMechanisms: "OAUTHBEARER", JAASConfig: PlainLoginModule + ` required user_a="pw";`,
		Listener: map[string]string{"listener.name.plain.sasl.enabled.mechanisms": "PLAIN"}}, "PLAIN", nil, Hooks{})
	if err != nil || srv.AcceptsUnsigned() || srv.oauth != nil {
		t.Fatalf("%+v %v", srv, err)
	}
}
