package sasl

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// OAuthLoginModule is the class of OAUTHBEARER's JAAS entry.
const OAuthLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

// unsecuredValidator checks KIP-255's unsecured JWTs (alg "none"), as
// Kafka's OAuthBearerUnsecuredValidatorCallbackHandler does: for
// development only. Options are that handler's JAAS options.
//
// Invariants: read-only once built.
type unsecuredValidator struct {
	principalClaim string        // unsecuredValidatorPrincipalClaimName, "sub"
	scopeClaim     string        // unsecuredValidatorScopeClaimName, "scope"
	requiredScope  []string      // unsecuredValidatorRequiredScope
	skew           time.Duration // unsecuredValidatorAllowableClockSkewMs
	now            func() time.Time
}

func newUnsecuredValidator(opts map[string]string) (*unsecuredValidator, error) {
	v := &unsecuredValidator{principalClaim: "sub", scopeClaim: "scope", now: time.Now}
	if s := strings.TrimSpace(opts["unsecuredValidatorPrincipalClaimName"]); s != "" {
		v.principalClaim = s
	}
	if s := strings.TrimSpace(opts["unsecuredValidatorScopeClaimName"]); s != "" {
		v.scopeClaim = s
	}
	for _, s := range strings.Split(opts["unsecuredValidatorRequiredScope"], " ") {
		if s = strings.TrimSpace(s); s != "" {
			v.requiredScope = append(v.requiredScope, s)
		}
	}
	if s := strings.TrimSpace(opts["unsecuredValidatorAllowableClockSkewMs"]); s != "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("unsecuredValidatorAllowableClockSkewMs %q: want a non-negative integer", s)
		}
		v.skew = time.Duration(ms) * time.Millisecond
	}
	return v, nil
}

// ParseOAuthBearer splits an OAUTHBEARER client message (RFC 7628):
// gs2-header \x01 auth=Bearer <token> \x01 (key=value \x01)* \x01.
func ParseOAuthBearer(msg []byte) (token string, ext map[string]string, err error) {
	s := string(msg)
	gs2, rest, ok := strings.Cut(s, "\x01")
	if !ok || !(strings.HasPrefix(gs2, "n,") || strings.HasPrefix(gs2, "y,")) || !strings.HasSuffix(gs2, ",") {
		return "", nil, errors.New("invalid OAUTHBEARER message: bad GS2 header")
	}
	if !strings.HasSuffix(rest, "\x01\x01") {
		return "", nil, errors.New("invalid OAUTHBEARER message: not ended by two separators")
	}
	ext = map[string]string{}
	for kv := range strings.SplitSeq(strings.TrimSuffix(rest, "\x01\x01"), "\x01") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return "", nil, errors.New("invalid OAUTHBEARER message: want key=value")
		}
		if k == "auth" {
			t, ok := strings.CutPrefix(v, "Bearer ")
			if !ok || strings.TrimSpace(t) == "" {
				return "", nil, errors.New("invalid OAUTHBEARER message: auth is not a Bearer token")
			}
			token = strings.TrimSpace(t)
			continue
		}
		ext[k] = v
	}
	if token == "" {
		return "", nil, errors.New("invalid OAUTHBEARER message: no auth")
	}
	return token, ext, nil
}

// validate checks an unsecured JWT and returns its principal name and
// expiry.
func (v *unsecuredValidator) validate(token string) (string, time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[2] != "" {
		return "", time.Time{}, errors.New("not an unsecured JWT (header.payload. with no signature)")
	}
	var hdr map[string]any
	if err := decodeJWTPart(parts[0], &hdr); err != nil {
		return "", time.Time{}, fmt.Errorf("JWT header: %w", err)
	}
	if alg, _ := hdr["alg"].(string); alg != "none" {
		return "", time.Time{}, fmt.Errorf("JWT alg %q: only unsecured (none) tokens are accepted", alg)
	}
	var claims map[string]any
	if err := decodeJWTPart(parts[1], &claims); err != nil {
		return "", time.Time{}, fmt.Errorf("JWT payload: %w", err)
	}
	now := v.now()
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return "", time.Time{}, errors.New("JWT has no numeric exp claim")
	}
	if !now.Before(exp.Add(v.skew)) {
		return "", time.Time{}, errors.New("JWT expired")
	}
	if iat, ok := numericDate(claims["iat"]); ok && iat.After(now.Add(v.skew)) {
		return "", time.Time{}, errors.New("JWT issued in the future")
	}
	if _, present := claims["iat"]; present {
		if _, ok := numericDate(claims["iat"]); !ok {
			return "", time.Time{}, errors.New("JWT iat claim is not a number")
		}
	}
	sub, _ := claims[v.principalClaim].(string)
	if strings.TrimSpace(sub) == "" {
		return "", time.Time{}, fmt.Errorf("JWT has no %s claim", v.principalClaim)
	}
	if len(v.requiredScope) > 0 {
		have := map[string]bool{}
		switch sc := claims[v.scopeClaim].(type) {
		case string:
			for s := range strings.SplitSeq(sc, " ") {
				have[s] = true
			}
		case []any:
			for _, s := range sc {
				if str, ok := s.(string); ok {
					have[str] = true
				}
			}
		}
		for _, s := range v.requiredScope {
			if !have[s] {
				return "", time.Time{}, fmt.Errorf("JWT lacks the required scope %q", s)
			}
		}
	}
	return sub, exp, nil
}

func decodeJWTPart(s string, dst any) error {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return errors.New("not base64url")
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return errors.New("not a JSON object")
	}
	return nil
}

// numericDate reads a JWT NumericDate (seconds, possibly fractional).
func numericDate(v any) (time.Time, bool) {
	f, ok := v.(float64)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e13 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}

// tokenValidator checks a bearer token: the unsecured or the JWKS one.
type tokenValidator interface {
	validate(token string) (principal string, exp time.Time, err error)
}

// invalidToken is what a client is told of any token refused, as Kafka
// words it (RFC 7628 section 3.2.2): the reason goes to the log and the
// audit line only.
const invalidToken = `{"status":"invalid_token"}`

// oauthFailure is the error of an exchange whose token was refused:
// reason is why (for the log), ClientMessage what the client hears.
type oauthFailure struct{ reason error }

func (f *oauthFailure) Error() string { return "invalid token: " + f.reason.Error() }

// ClientMessage is the SaslAuthenticate error message, unprefixed, as
// Kafka sends it for OAUTHBEARER.
func (f *oauthFailure) ClientMessage() string { return invalidToken }

// Reason is why the token was refused.
func (f *oauthFailure) Reason() string { return f.reason.Error() }

// oauthExchange is one OAUTHBEARER authentication: the client's message,
// and when its token is refused Kafka's error exchange: the server
// answers the JSON error as a challenge, the client acknowledges with a
// single %x01, and the server then fails the authentication with that
// JSON as SASL_AUTHENTICATION_FAILED's message.
type oauthExchange struct {
	v        tokenValidator
	now      func() time.Time
	lifetime time.Duration // connections.max.reauth.ms; 0 = bounded by the token alone
	refused  error         // the token was refused: the next message must be %x01
	done     bool
}

func (x *oauthExchange) Step(msg []byte) ([]byte, bool, string, time.Duration, error) {
	if reason := x.refused; reason != nil {
		x.done, x.refused = true, nil
		if len(msg) != 1 || msg[0] != 0x01 {
			reason = fmt.Errorf("%w (and the client answered the error with something other than %%x01)", reason)
		}
		return nil, false, "", 0, &oauthFailure{reason: reason}
	}
	if x.done {
		return nil, false, "", 0, errors.New("OAUTHBEARER takes one message")
	}
	token, _, err := ParseOAuthBearer(msg)
	if err != nil {
		x.done = true
		return nil, false, "", 0, err
	}
	sub, exp, err := x.v.validate(token)
	if err != nil {
		x.refused = err
		return []byte(invalidToken), false, "", 0, nil
	}
	x.done = true
	// The session ends no later than the token (KIP-368 re-authentication
	// takes a fresh one), even with connections.max.reauth.ms 0: a token
	// outliving its exp on an open connection would be a credential that
	// cannot be revoked.
	now := time.Now
	if x.now != nil {
		now = x.now
	}
	lifetime := max(exp.Sub(now()), time.Millisecond)
	if x.lifetime > 0 && x.lifetime < lifetime {
		lifetime = x.lifetime
	}
	return []byte{}, true, "User:" + sub, lifetime, nil
}
