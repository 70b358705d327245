package sasl

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The class names of Kafka's OAUTHBEARER server callback handlers
// (listener.name.<l>.oauthbearer.sasl.server.callback.handler.class).
const (
	// OAuthValidatorHandler is Kafka 4's name of the JWKS validator
	// (KIP-768), OAuthValidatorHandler3 its 3.x name.
	OAuthValidatorHandler  = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
	OAuthValidatorHandler3 = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
	// OAuthUnsecuredHandler is the default: KIP-255's unsecured tokens.
	OAuthUnsecuredHandler = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)

// maxTokenBytes bounds a token before it is decoded. Providers' access
// tokens are a few kilobytes; the frame itself is bounded by
// sasl.server.max.receive.size.
const maxTokenBytes = 64 << 10

// signedAlgs are the signature algorithms a token may use: asymmetric
// only, so "none" and the HMAC algorithms (whose "key" would be public
// JWKS material) are refused before any key is looked at.
var signedAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// OAuthKeys are the sasl.oauthbearer.* keys the JWKS validator reads, with
// Kafka's defaults.
var OAuthKeys = []struct{ Name, Def, Doc string }{
	{"sasl.oauthbearer.jwks.endpoint.url", "", "The JWKS (RFC 7517) that signed OAUTHBEARER tokens are checked against: an https, http or file URL. Setting it makes every OAUTHBEARER listener check signed tokens (KIP-768) unless its callback handler is explicitly the unsecured one."},
	{"sasl.oauthbearer.expected.issuer", "", "When set, a token's iss claim must be exactly this."},
	{"sasl.oauthbearer.expected.audience", "", "When set (comma separated), a token's aud claim must contain one of these."},
	{"sasl.oauthbearer.sub.claim.name", "sub", "The claim whose value is the principal (User:<value>)."},
	{"sasl.oauthbearer.scope.claim.name", "scope", "The claim holding the token's scopes (a space separated string or a list); checked for its shape only."},
	{"sasl.oauthbearer.clock.skew.seconds", "30", "Leeway allowed when exp, iat and nbf are compared with this broker's clock."},
	{"sasl.oauthbearer.jwks.endpoint.refresh.ms", "3600000", "How often the JWKS is fetched again; a token naming a kid the set lacks asks for a refresh sooner (at most one every 10 s)."},
	{"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "100", "First wait before a failed JWKS fetch is retried; the wait doubles."},
	{"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "10000", "Longest wait between JWKS fetch retries, and the bound of one refresh's waits in all; while no set was ever fetched, a refresh is tried this often."},
}

// oauthConfig reads listener's sasl.oauthbearer.* key name as Kafka's
// handler does: listener.name.<l>.oauthbearer.<name> (the form Kafka's
// documentation gives), else listener.name.<l>.<name>, else the
// broker-wide key, else Kafka's default.
func (s Settings) oauthConfig(listener, name string) string {
	l := "listener.name." + strings.ToLower(listener) + "."
	for _, k := range []string{l + "oauthbearer." + name, l + name} {
		if v, ok := s.Listener[k]; ok {
			return strings.TrimSpace(v)
		}
	}
	if v, ok := s.OAuth[name]; ok {
		return strings.TrimSpace(v)
	}
	for _, k := range OAuthKeys {
		if k.Name == name {
			return k.Def
		}
	}
	return ""
}

// signedValidator checks JWS-signed JWTs against a JWKS as Kafka's
// OAuthBearerValidatorCallbackHandler does: an asymmetric signature by a
// key of the set, exp and iat present, exp/iat/nbf within the clock skew,
// the expected issuer and audience, and a principal claim.
//
// Invariants: read-only once built, except keys' own state (jwks).
type signedValidator struct {
	keys       *jwks
	issuer     string
	audience   []string
	subClaim   string
	scopeClaim string
	skew       time.Duration
	now        func() time.Time
}

func newSignedValidator(s Settings, listener string) (*signedValidator, error) {
	get := func(name string) string { return s.oauthConfig(listener, name) }
	ms := func(name string) (time.Duration, error) {
		n, err := strconv.ParseInt(get(name), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s %q: want a non-negative integer", name, get(name))
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	refresh, err := ms("sasl.oauthbearer.jwks.endpoint.refresh.ms")
	if err != nil {
		return nil, err
	}
	if refresh < time.Second {
		return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.refresh.ms %s: want at least 1000", get("sasl.oauthbearer.jwks.endpoint.refresh.ms"))
	}
	backoff, err := ms("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")
	if err != nil {
		return nil, err
	}
	backoffMax, err := ms("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms")
	if err != nil {
		return nil, err
	}
	backoff = max(backoff, time.Millisecond)
	skew, err := strconv.ParseInt(get("sasl.oauthbearer.clock.skew.seconds"), 10, 64)
	if err != nil || skew < 0 {
		return nil, fmt.Errorf("sasl.oauthbearer.clock.skew.seconds %q: want a non-negative integer", get("sasl.oauthbearer.clock.skew.seconds"))
	}
	u := get("sasl.oauthbearer.jwks.endpoint.url")
	if u == "" {
		return nil, errors.New("the OAUTHBEARER validator checks signed tokens against a JWKS: set sasl.oauthbearer.jwks.endpoint.url")
	}
	keys, err := newJWKS(u, refresh, backoff, backoffMax)
	if err != nil {
		return nil, err
	}
	v := &signedValidator{keys: keys, issuer: get("sasl.oauthbearer.expected.issuer"),
		subClaim: get("sasl.oauthbearer.sub.claim.name"), scopeClaim: get("sasl.oauthbearer.scope.claim.name"),
		skew: time.Duration(skew) * time.Second, now: time.Now}
	for a := range strings.SplitSeq(get("sasl.oauthbearer.expected.audience"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			v.audience = append(v.audience, a)
		}
	}
	if v.subClaim == "" || v.scopeClaim == "" {
		return nil, errors.New("sasl.oauthbearer.sub.claim.name and sasl.oauthbearer.scope.claim.name may not be empty")
	}
	return v, nil
}

// validate checks a signed token and returns its principal name and
// expiry. Errors say why, for the log and the audit line; the client
// hears only invalid_token.
func (v *signedValidator) validate(token string) (string, time.Time, error) {
	if len(token) > maxTokenBytes {
		return "", time.Time{}, fmt.Errorf("token of %d bytes (at most %d)", len(token), maxTokenBytes)
	}
	tok, err := jwt.ParseSigned(token, signedAlgs)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("not a JWS-signed JWT with an asymmetric algorithm: %w", err)
	}
	if len(tok.Headers) != 1 {
		return "", time.Time{}, errors.New("JWT with more than one signature")
	}
	kid, alg := tok.Headers[0].KeyID, tok.Headers[0].Algorithm
	cands := v.keys.cur.Load().find(kid, alg)
	if len(cands) == 0 && kid != "" && v.keys.refreshNow() {
		cands = v.keys.cur.Load().find(kid, alg) // a rotated key, perhaps
	}
	if len(cands) == 0 {
		if v.keys.cur.Load() == nil {
			return "", time.Time{}, errors.New("no JWKS fetched yet")
		}
		return "", time.Time{}, fmt.Errorf("no key in the JWKS for kid %q alg %s", kid, alg)
	}
	var std jwt.Claims
	var claims map[string]any
	verified := false
	for _, k := range cands {
		if err = tok.Claims(k.Key, &std, &claims); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return "", time.Time{}, fmt.Errorf("signature (kid %q alg %s): %w", kid, alg, err)
	}
	if std.Expiry == nil {
		return "", time.Time{}, errors.New("JWT has no exp claim")
	}
	if std.IssuedAt == nil {
		return "", time.Time{}, errors.New("JWT has no iat claim")
	}
	exp := std.Expiry.Time()
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: v.issuer, AnyAudience: v.audience, Time: v.now()}, v.skew); err != nil {
		return "", time.Time{}, fmt.Errorf("JWT claims (iss %q aud %v exp %s): %w", std.Issuer, []string(std.Audience), exp.UTC().Format(time.RFC3339), err)
	}
	sub, _ := claims[v.subClaim].(string)
	if strings.TrimSpace(sub) == "" {
		return "", time.Time{}, fmt.Errorf("JWT has no string %s claim", v.subClaim)
	}
	switch sc := claims[v.scopeClaim].(type) {
	case nil, string:
	case []any:
		for _, s := range sc {
			if _, ok := s.(string); !ok {
				return "", time.Time{}, fmt.Errorf("JWT %s claim lists a non-string", v.scopeClaim)
			}
		}
	default:
		return "", time.Time{}, fmt.Errorf("JWT %s claim is neither a string nor a list", v.scopeClaim)
	}
	return sub, exp, nil
}
