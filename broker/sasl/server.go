package sasl

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fjordlog/fjord/protocol"
	"github.com/rs/zerolog"
)

// Settings are the node's SASL keys as its sources gave them.
type Settings struct {
	EnabledMechanisms    string // sasl.enabled.mechanisms (Kafka's default GSSAPI)
	InterBrokerMechanism string // sasl.mechanism.inter.broker.protocol (Kafka's default GSSAPI)
	ControllerMechanism  string // sasl.mechanism.controller.protocol (Kafka's default GSSAPI)
	JAASConfig           string // sasl.jaas.config, for every listener and mechanism not given its own
	// JAASFile is the path KAFKA_OPTS named with
	// -Djava.security.auth.login.config.
	JAASFile string
	// ReauthMs is connections.max.reauth.ms: 0 = sessions do not expire.
	ReauthMs int64
	// ScramBootstrap is fjord.sasl.scram.bootstrap (ParseScramBootstrap):
	// credentials created at start-up when they do not exist.
	ScramBootstrap string
	// Listener holds the listener.name.<l>.… SASL keys, by full key
	// name (listener name lower-case, as Kafka writes them).
	Listener map[string]string
	// OAuth holds the broker-wide sasl.oauthbearer.* keys (OAuthKeys), by
	// name.
	OAuth map[string]string
}

// Hooks are what a Server tells the node that built it.
type Hooks struct {
	Log zerolog.Logger
	// Denied hears every failed authentication: the mechanism and why
	// (never a secret). It may be nil.
	Denied func(remote net.Addr, mechanism, reason string)
}

// Supported are the mechanisms Fjord serves.
var Supported = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}

// ListenerMechanisms is the listener's enabled mechanisms:
// listener.name.<l>.sasl.enabled.mechanisms, else sasl.enabled.mechanisms.
func (s Settings) ListenerMechanisms(listener string) []string {
	v, ok := s.Listener["listener.name."+strings.ToLower(listener)+".sasl.enabled.mechanisms"]
	if !ok {
		v = s.EnabledMechanisms
	}
	if strings.TrimSpace(v) == "" {
		v = "GSSAPI"
	}
	var out []string
	for m := range strings.SplitSeq(v, ",") {
		if m = strings.ToUpper(strings.TrimSpace(m)); m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// Reauth is the session lifetime on listener for mechanism:
// listener.name.<l>.<mechanism>.connections.max.reauth.ms, else
// connections.max.reauth.ms; 0 = unbounded.
func (s Settings) Reauth(listener, mechanism string) time.Duration {
	ms := s.ReauthMs
	if v, ok := s.Listener["listener.name."+strings.ToLower(listener)+"."+strings.ToLower(mechanism)+".connections.max.reauth.ms"]; ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 {
			ms = n
		}
	}
	return time.Duration(ms) * time.Millisecond
}

// InterBroker is the mechanism brokers authenticate to each other with.
func (s Settings) InterBroker() string {
	if m := strings.ToUpper(strings.TrimSpace(s.InterBrokerMechanism)); m != "" {
		return m
	}
	return "GSSAPI"
}

// Controller is the mechanism brokers and controllers authenticate to the
// controllers with on a SASL CONTROLLER listener.
func (s Settings) Controller() string {
	if m := strings.ToUpper(strings.TrimSpace(s.ControllerMechanism)); m != "" {
		return m
	}
	return "GSSAPI"
}

// Modules finds the JAAS login modules for one listener and mechanism,
// in Kafka's order: listener.name.<l>.<mechanism>.sasl.jaas.config, then
// sasl.jaas.config, then the JAAS file's "<l>.KafkaServer" section, then
// its "KafkaServer". where names the source, for messages.
func (s Settings) Modules(listener, mechanism string) (mods []LoginModule, where string, err error) {
	mods, where, _, err = s.modules(listener, mechanism)
	return mods, where, err
}

// modules is Modules, and whether the source is the listener's own
// (listener.name.<l>.<mechanism>.sasl.jaas.config or the file's
// "<l>.KafkaServer") rather than one every listener shares.
func (s Settings) modules(listener, mechanism string) (mods []LoginModule, where string, own bool, err error) {
	l := strings.ToLower(listener)
	key := "listener.name." + l + "." + strings.ToLower(mechanism) + ".sasl.jaas.config"
	if v, ok := s.Listener[key]; ok {
		mods, err := ParseJAASConfig(v)
		return mods, key, true, err
	}
	if s.JAASConfig != "" {
		mods, err := ParseJAASConfig(s.JAASConfig)
		return mods, "sasl.jaas.config", false, err
	}
	if s.JAASFile == "" {
		return nil, "", false, fmt.Errorf("listener %s: no JAAS configuration for %s: set %s, or name a JAAS file in KAFKA_OPTS (-Djava.security.auth.login.config=)", listener, mechanism, key)
	}
	data, err := os.ReadFile(s.JAASFile)
	if err != nil {
		return nil, "", false, fmt.Errorf("JAAS file: %w", err)
	}
	secs, err := ParseJAASFile(string(data))
	if err != nil {
		return nil, "", false, fmt.Errorf("JAAS file %s: %w", s.JAASFile, err)
	}
	for _, name := range []string{l + ".KafkaServer", "KafkaServer"} {
		if mods, ok := secs[name]; ok {
			return mods, s.JAASFile + " section " + name, name != "KafkaServer", nil
		}
	}
	return nil, "", false, fmt.Errorf("JAAS file %s: no section %s.KafkaServer or KafkaServer for listener %s", s.JAASFile, l, listener)
}

// loginModule picks the mechanism's module among mods.
func loginModule(mods []LoginModule, mechanism string) (LoginModule, bool) {
	class := PlainLoginModule
	if strings.HasPrefix(mechanism, "SCRAM-") {
		class = ScramLoginModule
	}
	for _, m := range mods {
		if m.Class == class {
			return m, true
		}
	}
	return LoginModule{}, false
}

// Login is the username and password this broker presents with mechanism
// on listener (the login module's username and password options), for
// its own connections to other brokers.
func (s Settings) Login(listener, mechanism string) (user, pass string, err error) {
	mods, where, err := s.Modules(listener, mechanism)
	if err != nil {
		return "", "", err
	}
	m, ok := loginModule(mods, mechanism)
	if !ok {
		return "", "", fmt.Errorf("%s: no login module for %s", where, mechanism)
	}
	user, uok := m.Options["username"]
	pass, pok := m.Options["password"]
	if !uok || !pok {
		return "", "", fmt.Errorf("%s: %s has no username and password options for the broker's own connections", where, m.Class)
	}
	return user, pass, nil
}

// Server is one listener's protocol.Authenticator.
//
// Invariants: read-only once built; every mechanism of mechs is served
// (plain is non-nil when PLAIN is in mechs).
type Server struct {
	mechs  []string
	reauth map[string]time.Duration // session lifetime by mechanism; 0 = unbounded
	plain  map[string]string        // PLAIN user name -> password (the module's user_<name> options)
	scram  ScramLookup              // the SCRAM credentials of the metadata image
	oauth  tokenValidator           // OAUTHBEARER's, when enabled
	jwks   *jwks                    // the signed validator's key set, refreshed by Run; nil without one
	// unsigned: oauth is the unsecured validator, which the listener's
	// own configuration asked for (buildOAuth).
	unsigned bool
	hooks    Hooks
}

// NewServer builds the authenticator of one SASL listener, or says why
// the listener cannot be served. scram serves the SCRAM mechanisms (it
// may be nil when none is enabled).
//
// It does no network I/O: a JWKS over http(s) is fetched by Run (a file
// JWKS is read here, and a bad one stops start-up as in Kafka).
func NewServer(s Settings, listener string, scram ScramLookup, hooks Hooks) (*Server, error) {
	srv := &Server{mechs: s.ListenerMechanisms(listener), scram: scram, reauth: map[string]time.Duration{}, hooks: hooks}
	for _, m := range srv.mechs {
		if !slices.Contains(Supported, m) {
			return nil, fmt.Errorf("listener %s: SASL mechanism %s is not supported (Fjord serves %s): set sasl.enabled.mechanisms", listener, m, strings.Join(Supported, ", "))
		}
		srv.reauth[m] = s.Reauth(listener, m)
		if v, ok := s.Listener["listener.name."+strings.ToLower(listener)+"."+strings.ToLower(m)+".connections.max.reauth.ms"]; ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil || n < 0 {
				return nil, fmt.Errorf("listener %s: %s connections.max.reauth.ms %q: want a non-negative integer", listener, m, v)
			}
		}
		if strings.HasPrefix(m, "SCRAM-") && scram == nil {
			return nil, fmt.Errorf("listener %s: %s needs the SCRAM credentials of the metadata image", listener, m)
		}
	}
	if slices.Contains(srv.mechs, "OAUTHBEARER") {
		if err := srv.buildOAuth(s, listener); err != nil {
			return nil, fmt.Errorf("listener %s: OAUTHBEARER: %w", listener, err)
		}
	}
	if slices.Contains(srv.mechs, "PLAIN") {
		mods, where, err := s.Modules(listener, "PLAIN")
		if err != nil {
			return nil, err
		}
		m, ok := loginModule(mods, "PLAIN")
		if !ok {
			return nil, fmt.Errorf("listener %s: %s has no %s for PLAIN", listener, where, PlainLoginModule)
		}
		srv.plain = map[string]string{}
		for k, v := range m.Options {
			if u, ok := strings.CutPrefix(k, "user_"); ok && u != "" {
				srv.plain[u] = v
			}
		}
		if len(srv.plain) == 0 {
			return nil, fmt.Errorf("listener %s: %s gives PLAIN no users (user_<name>=\"<password>\" options)", listener, where)
		}
	}
	return srv, nil
}

// buildOAuth picks the listener's OAUTHBEARER validator. Kafka picks it by
// the listener's callback handler class alone, and a listener that names
// none accepts unsecured tokens (KIP-255), anyone's to mint for any user:
// with OAUTHBEARER enabled broker-wide, every SASL listener the operator
// did not secure one by one. Fjord keeps Kafka's keys and meanings but
// accepts unsigned tokens only where the listener's own configuration
// asks for them:
//
//  1. the class is the JWKS validator: signed tokens;
//  2. the class is the unsecured validator: unsigned tokens;
//  3. no class, and a JWKS URL applies to the listener (its own or the
//     broker-wide one): signed tokens (Kafka would accept unsecured ones
//     there, which would look secure and not be);
//  4. no class, and the listener's own OAuthBearerLoginModule entry
//     (listener.name.<l>.oauthbearer.sasl.jaas.config, or the JAAS file's
//     "<l>.KafkaServer") sets an unsecuredValidator* option, which only
//     the unsecured validator reads: unsigned tokens;
//  5. otherwise the listener can check nothing, and start-up stops.
//
// Every configuration Fjord serves with unsigned tokens is one Kafka
// serves with its unsecured validator too. The broker-wide
// sasl.jaas.config and the file's KafkaServer section never suffice for
// 4: they reach every listener, which is the silent spread this rule
// stops.
func (srv *Server) buildOAuth(s Settings, listener string) error {
	l := strings.ToLower(listener)
	key := "listener.name." + l + ".oauthbearer.sasl.server.callback.handler.class"
	class := strings.TrimSpace(s.Listener[key])
	// Kafka wants an OAuthBearerLoginModule entry; its validator options
	// are optional, so a listener without one gets the defaults.
	var opts map[string]string
	own := false
	if mods, _, o, err := s.modules(listener, "OAUTHBEARER"); err == nil {
		for _, m := range mods {
			if m.Class == OAuthLoginModule {
				opts, own = m.Options, o
			}
		}
	}
	unsecuredClass := strings.HasPrefix(class, "org.apache.kafka.") && strings.HasSuffix(class, ".OAuthBearerUnsecuredValidatorCallbackHandler")
	switch {
	case class == OAuthValidatorHandler || class == OAuthValidatorHandler3,
		class == "" && s.oauthConfig(listener, "sasl.oauthbearer.jwks.endpoint.url") != "":
		v, err := newSignedValidator(s, listener)
		if err != nil {
			return err
		}
		v.keys.log = srv.hooks.Log.With().Str("listener", listener).Logger()
		if v.keys.src.Scheme == "file" {
			if err := v.keys.load(context.Background()); err != nil {
				return err
			}
		}
		srv.oauth, srv.jwks = v, v.keys
		return nil
	case unsecuredClass, class == "" && own && hasUnsecuredValidatorOption(opts):
		v, err := newUnsecuredValidator(opts)
		if err != nil {
			return err
		}
		srv.oauth, srv.unsigned = v, true
		return nil
	case class == "":
		return fmt.Errorf("it can neither check signed tokens (no sasl.oauthbearer.jwks.endpoint.url applies to it) nor was it told to accept unsigned ones; "+
			"set sasl.oauthbearer.jwks.endpoint.url (or listener.name.%s.oauthbearer.sasl.oauthbearer.jwks.endpoint.url), or, for development only, %s=%s",
			l, key, OAuthUnsecuredHandler)
	default:
		return fmt.Errorf("%s %q: Fjord serves %s (JWKS-signed tokens) and %s", key, class, OAuthValidatorHandler, OAuthUnsecuredHandler)
	}
}

// hasUnsecuredValidatorOption reports whether a login module's options
// configure the unsecured validator.
func hasUnsecuredValidatorOption(opts map[string]string) bool {
	for k := range opts {
		if strings.HasPrefix(k, "unsecuredValidator") {
			return true
		}
	}
	return false
}

// AcceptsUnsigned reports whether the listener accepts unsecured
// OAUTHBEARER tokens, which anyone can mint for any user: its own
// configuration asked for them (buildOAuth). The broker warns of it at
// start-up.
func (s *Server) AcceptsUnsigned() bool { return s.unsigned }

// Run keeps the server's background state fresh (the JWKS) until ctx
// ends; it returns at once when there is none.
func (s *Server) Run(ctx context.Context) {
	if s.jwks != nil {
		s.jwks.run(ctx)
	}
}

// Mechanisms implements protocol.Authenticator.
func (s *Server) Mechanisms() []string { return slices.Clone(s.mechs) }

// Start implements protocol.Authenticator.
func (s *Server) Start(mechanism string, remote net.Addr, _ *tls.ConnectionState) (protocol.SASLExchange, error) {
	var x protocol.SASLExchange
	switch mechanism {
	case "PLAIN":
		if s.plain != nil {
			x = &plainExchange{users: s.plain, lifetime: s.reauth[mechanism]}
		}
	case "OAUTHBEARER":
		if s.oauth != nil {
			x = &oauthExchange{v: s.oauth, lifetime: s.reauth[mechanism]}
		}
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		if s.scram != nil && slices.Contains(s.mechs, mechanism) {
			x = &scramExchange{mechanism: mechanism, lookup: s.scram, lifetime: s.reauth[mechanism]}
		}
	}
	if x == nil {
		return nil, fmt.Errorf("mechanism %s is not enabled", mechanism)
	}
	if s.hooks.Denied == nil {
		return x, nil
	}
	return &reportingExchange{SASLExchange: x, mechanism: mechanism, remote: remote, denied: s.hooks.Denied}, nil
}

// reportingExchange tells Hooks.Denied of the exchange's failure, once.
// An OAUTHBEARER refusal is told when the token is refused, not when the
// client acknowledges the error: many clients (franz-go) never do.
type reportingExchange struct {
	protocol.SASLExchange
	mechanism string
	remote    net.Addr
	denied    func(net.Addr, string, string)
}

func (r *reportingExchange) Step(msg []byte) ([]byte, bool, string, time.Duration, error) {
	reply, done, principal, lifetime, err := r.SASLExchange.Step(msg)
	var f *oauthFailure
	switch ox, isOAuth := r.SASLExchange.(*oauthExchange); {
	case errors.As(err, &f): // told at the refusal
	case err != nil:
		r.denied(r.remote, r.mechanism, err.Error())
	case isOAuth && ox.refused != nil:
		r.denied(r.remote, r.mechanism, ox.refused.Error())
	}
	return reply, done, principal, lifetime, err
}

// errBadCredentials is what a client hears for an unknown user or a wrong
// password alike, as Kafka words it.
var errBadCredentials = errors.New("Invalid username or password")

// plainExchange is RFC 4616 PLAIN: one client message, an empty reply.
type plainExchange struct {
	users    map[string]string
	lifetime time.Duration
	done     bool
}

// ParsePlain splits a PLAIN message: [authzid] NUL authcid NUL passwd.
func ParsePlain(msg []byte) (authzid, user, pass string, err error) {
	parts := strings.Split(string(msg), "\x00")
	if len(parts) != 3 {
		return "", "", "", errors.New("Invalid SASL/PLAIN response: expected 3 tokens")
	}
	if parts[1] == "" {
		return "", "", "", errors.New("Authentication failed: username not specified")
	}
	if parts[2] == "" {
		return "", "", "", errors.New("Authentication failed: password not specified")
	}
	return parts[0], parts[1], parts[2], nil
}

func (p *plainExchange) Step(msg []byte) ([]byte, bool, string, time.Duration, error) {
	if p.done {
		return nil, false, "", 0, errors.New("PLAIN takes one message")
	}
	p.done = true
	authzid, user, pass, err := ParsePlain(msg)
	if err != nil {
		return nil, false, "", 0, err
	}
	if authzid != "" && authzid != user {
		return nil, false, "", 0, errors.New("Authentication failed: Client requested an authorization id that is different from username")
	}
	want, ok := p.users[user]
	// Compare even for an unknown user, so the time taken does not say
	// which user names exist.
	if subtle.ConstantTimeCompare([]byte(want), []byte(pass)) != 1 || !ok {
		return nil, false, "", 0, errBadCredentials
	}
	return []byte{}, true, "User:" + user, p.lifetime, nil
}
