package sasl

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/rs/zerolog"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/fjordlog/fjord/controller"
)

// Listener is one client listener as the broker resolved it: its name
// and its security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).
type Listener struct{ Name, Protocol string }

// ListenerConfig is what the SASL side of a node's listeners is built
// from; the broker fills it from its configuration.
type ListenerConfig struct {
	Settings Settings // the sasl.* keys
	// Client are the client listeners, in listener order; Build's Servers
	// are indexed alike.
	Client []Listener
	// Controller and ControllerProtocol are the CONTROLLER listener (the
	// first of controller.listener.names) and its protocol; ServeController
	// is set on a node with the controller role, which serves it.
	Controller, ControllerProtocol string
	ServeController                bool
	// InterBroker and InterBrokerProtocol are the listener brokers
	// replicate through; Broker is set on a node with the broker role,
	// which dials it.
	InterBroker, InterBrokerProtocol string
	Broker                           bool
	// Scram serves the client listeners' SCRAM exchanges, ControllerScram
	// the CONTROLLER listener's (ImageScram).
	Scram, ControllerScram ScramLookup
	// Denied hears every failed authentication (Hooks.Denied) with the
	// listener it happened on: an index of Client, or -1 for the
	// CONTROLLER listener. It may be nil.
	Denied func(listener int, remote net.Addr, mechanism, reason string)
	Log    zerolog.Logger
}

// Listeners are the SASL sides of a node's listeners, read-only once
// Build returns.
type Listeners struct {
	// Servers authenticate each client listener's connections, by index
	// of ListenerConfig.Client; nil for a listener without SASL.
	Servers []*Server
	// Controller authenticates the CONTROLLER listener's connections
	// (raft's and Kafka's) when it is SASL, on a controller; else nil.
	Controller *Server
	// ControllerClient is this node's identity towards the controllers
	// when the CONTROLLER listener is SASL (sasl.mechanism.controller.protocol,
	// as Kafka's KRaft nodes do): brokers' registrations and heartbeats,
	// and raft between voters. Else nil.
	ControllerClient kgosasl.Mechanism
	// InterBroker is this broker's identity on the others' inter-broker
	// listener when it is SASL; else nil.
	InterBroker kgosasl.Mechanism
}

func isSASL(protocol string) bool { return protocol == "SASL_PLAINTEXT" || protocol == "SASL_SSL" }

// Build makes the authenticator of every SASL client listener, then the
// CONTROLLER listener's SASL sides, then the inter-broker identity. A SASL
// listener whose mechanisms or credentials cannot be served is an error,
// which stops start-up: serving it without authentication would look
// secure and not be. A listener that accepts unsigned OAUTHBEARER tokens
// is warned of, once, naming it.
func Build(cfg ListenerConfig) (*Listeners, error) {
	l := &Listeners{Servers: make([]*Server, len(cfg.Client))}
	hooks := func(listener int) Hooks {
		h := Hooks{Log: cfg.Log}
		if cfg.Denied != nil {
			h.Denied = func(remote net.Addr, mech, reason string) { cfg.Denied(listener, remote, mech, reason) }
		}
		return h
	}
	for i, c := range cfg.Client {
		switch c.Protocol {
		case "PLAINTEXT", "SSL": // TLS: broker/tlsconf's
		case "SASL_PLAINTEXT", "SASL_SSL": // SASL_SSL: TLS first (tlsconf), then SASL
			srv, err := NewServer(cfg.Settings, c.Name, cfg.Scram, hooks(i))
			if err != nil {
				return nil, err
			}
			l.Servers[i] = srv
			cfg.Log.Info().Str("listener", c.Name).Str("mechanisms", strings.Join(srv.Mechanisms(), ",")).Msg("SASL required")
			warnUnsigned(cfg.Log, c.Name, srv)
		default:
			return nil, fmt.Errorf("listener %s: security protocol %s is not served", c.Name, c.Protocol)
		}
	}
	if err := l.buildController(cfg, hooks(-1)); err != nil {
		return nil, err
	}
	if err := l.buildInterBroker(cfg); err != nil {
		return nil, err
	}
	return l, nil
}

// Runs are the servers' background loops (Server.Run) until ctx ends; the
// caller runs each on a goroutine it tracks.
func (l *Listeners) Runs(ctx context.Context) []func() {
	var out []func()
	for _, srv := range append(l.Servers, l.Controller) {
		if srv != nil {
			out = append(out, func() { srv.Run(ctx) })
		}
	}
	return out
}

// warnUnsigned logs that listener accepts unsigned OAUTHBEARER tokens:
// its configuration asked for them (buildOAuth), and whoever reaches it
// can be any user.
func warnUnsigned(log zerolog.Logger, listener string, srv *Server) {
	if srv.AcceptsUnsigned() {
		log.Warn().Str("listener", listener).Msg("OAUTHBEARER accepts unsigned tokens on this listener (its unsecured validator is configured): " +
			"anyone who reaches it can mint a token for any user (for development only: a listener others reach checks signed tokens, sasl.oauthbearer.jwks.endpoint.url)")
	}
}

// buildController prepares a SASL CONTROLLER listener (SASL_PLAINTEXT or
// SASL_SSL): on a controller its server side, which the listener's Kafka
// half and raft's connections both pass; on every node the identity it
// authenticates to the controllers with. A SCRAM identity must exist in
// the metadata log first, which the quorum cannot reach without it: use
// PLAIN for the controllers (docs/security.md).
func (l *Listeners) buildController(cfg ListenerConfig, hooks Hooks) error {
	name := cfg.Controller
	if !isSASL(cfg.ControllerProtocol) {
		return nil
	}
	if cfg.ServeController {
		srv, err := NewServer(cfg.Settings, name, cfg.ControllerScram, hooks)
		if err != nil {
			return err
		}
		l.Controller = srv
		warnUnsigned(cfg.Log, name, srv)
	}
	mech := cfg.Settings.Controller()
	m, user, err := cfg.Settings.ClientMechanism(name, mech)
	if err != nil {
		return fmt.Errorf("controller listener %s (sasl.mechanism.controller.protocol %s): %w", name, mech, err)
	}
	l.ControllerClient = m
	cfg.Log.Info().Str("listener", name).Str("mechanism", mech).Str("user", user).Msg("SASL controller listener: this node authenticates to the controllers")
	return nil
}

// buildInterBroker picks how this broker authenticates to the others when
// the inter-broker listener is SASL: sasl.mechanism.inter.broker.protocol
// with the username and password options of the listener's login module
// (every broker is assumed to share the listener's security settings, as
// in Kafka).
func (l *Listeners) buildInterBroker(cfg ListenerConfig) error {
	name := cfg.InterBroker
	if !cfg.Broker || !isSASL(cfg.InterBrokerProtocol) {
		return nil
	}
	mech := cfg.Settings.InterBroker()
	m, user, err := cfg.Settings.ClientMechanism(name, mech)
	if err != nil {
		return fmt.Errorf("inter-broker listener %s (sasl.mechanism.inter.broker.protocol %s): %w", name, mech, err)
	}
	l.InterBroker = m
	cfg.Log.Info().Str("listener", name).Str("mechanism", mech).Str("user", user).Msg("brokers authenticate to each other with SASL")
	return nil
}

// ImageScram serves SCRAM exchanges from the metadata image that image
// returns at each exchange; while it returns nil (a controller role not
// started yet) no user has a credential.
func ImageScram(image func() *controller.Image) ScramLookup {
	return func(mechanism, user string) (ScramSecret, bool) {
		img := image()
		if img == nil {
			return ScramSecret{}, false
		}
		s, ok := img.ScramCredential(user, controller.ScramMechanismNamed(mechanism))
		return ScramSecret{Salt: s.Salt, StoredKey: s.StoredKey, ServerKey: s.ServerKey, Iterations: s.Iterations}, ok
	}
}
