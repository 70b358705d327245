package broker

import (
	"fmt"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/sasl"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol"
)

// buildSASL makes the authenticator of every SASL client listener. A SASL
// listener whose mechanisms or credentials cannot be served stops
// start-up: serving it without authentication would look secure and not be.
func (b *Broker) buildSASL() error {
	b.saslServers = make([]protocol.Authenticator, len(b.advertised))
	for i, l := range b.advertised {
		switch l.Protocol {
		case "PLAINTEXT", "SSL": // TLS: tls.go's
		case "SASL_PLAINTEXT", "SASL_SSL": // SASL_SSL: TLS first (tls.go), then SASL
			listener := i
			srv, err := sasl.NewServer(b.cfg.SASL, l.Name, b.scramLookup, sasl.Hooks{Log: b.log,
				Denied: func(remote net.Addr, mech, reason string) { b.audit.authFailed(listener, remote, mech, reason) }})
			if err != nil {
				return err
			}
			b.saslServers[i] = srv
			b.goLoop(func() { srv.Run(b.ctx) })
			b.log.Info().Str("listener", l.Name).Str("mechanisms", strings.Join(srv.Mechanisms(), ",")).Msg("SASL required")
			b.warnUnsigned(l.Name, srv)
		default:
			return fmt.Errorf("listener %s: security protocol %s is not served", l.Name, l.Protocol)
		}
	}
	if err := b.buildControllerSASL(); err != nil {
		return err
	}
	return b.buildInterBrokerSASL()
}

// warnUnsigned logs, once at start-up, that listener accepts unsigned
// OAUTHBEARER tokens: its configuration asked for them (sasl.Server's
// buildOAuth), and whoever reaches it can be any user.
func (b *Broker) warnUnsigned(listener string, srv *sasl.Server) {
	if srv.AcceptsUnsigned() {
		b.log.Warn().Str("listener", listener).Msg("OAUTHBEARER accepts unsigned tokens on this listener (its unsecured validator is configured): " +
			"anyone who reaches it can mint a token for any user (for development only: a listener others reach checks signed tokens, sasl.oauthbearer.jwks.endpoint.url)")
	}
}

// buildInterBrokerSASL picks how this broker authenticates to the others
// when the inter-broker listener is SASL: sasl.mechanism.inter.broker.protocol
// with the username and password options of the listener's login module
// (every broker is assumed to share the listener's security settings, as
// in Kafka).
func (b *Broker) buildInterBrokerSASL() error {
	name := b.interBrokerListener()
	if p := b.cfg.ListenerProtocol(name); !b.cfg.HasRole("broker") || (p != "SASL_PLAINTEXT" && p != "SASL_SSL") {
		return nil
	}
	mech := b.cfg.SASL.InterBroker()
	m, user, err := b.clientMechanism(name, mech)
	if err != nil {
		return fmt.Errorf("inter-broker listener %s (sasl.mechanism.inter.broker.protocol %s): %w", name, mech, err)
	}
	b.interBrokerSASL = []kgo.Opt{kgo.SASL(m)}
	b.log.Info().Str("listener", name).Str("mechanism", mech).Str("user", user).Msg("brokers authenticate to each other with SASL")
	return nil
}

// clientMechanism is this node's own SASL identity on listener name for
// mechanism mech (sasl.Settings.ClientMechanism).
func (b *Broker) clientMechanism(name, mech string) (kgosasl.Mechanism, string, error) {
	return b.cfg.SASL.ClientMechanism(name, mech)
}

// buildControllerSASL prepares a SASL CONTROLLER listener (SASL_PLAINTEXT
// or SASL_SSL): on a controller its server side, which the listener's
// Kafka half and raft's connections both pass; on every node the identity
// it authenticates to the controllers with (sasl.mechanism.controller.protocol,
// as Kafka's KRaft nodes do): brokers' registrations and heartbeats, and
// raft between voters. A SCRAM identity must exist in the metadata log
// first, which the quorum cannot reach without it: use PLAIN for the
// controllers (docs/security.md).
func (b *Broker) buildControllerSASL() error {
	name := b.controllerListener()
	if p := b.cfg.ListenerProtocol(name); p != "SASL_PLAINTEXT" && p != "SASL_SSL" {
		return nil
	}
	if b.cfg.HasRole("controller") {
		srv, err := sasl.NewServer(b.cfg.SASL, name, b.ctlScramLookup, sasl.Hooks{Log: b.log,
			Denied: func(remote net.Addr, mech, reason string) { b.audit.authFailed(api.CtlListener, remote, mech, reason) }})
		if err != nil {
			return err
		}
		b.ctlSASLServer = srv
		b.goLoop(func() { srv.Run(b.ctx) })
		b.warnUnsigned(name, srv)
	}
	mech := b.cfg.SASL.Controller()
	m, user, err := b.clientMechanism(name, mech)
	if err != nil {
		return fmt.Errorf("controller listener %s (sasl.mechanism.controller.protocol %s): %w", name, mech, err)
	}
	b.ctlSASL = m
	b.log.Info().Str("listener", name).Str("mechanism", mech).Str("user", user).Msg("SASL controller listener: this node authenticates to the controllers")
	return nil
}

// ctlScramLookup serves the CONTROLLER listener's SCRAM exchanges from the
// metadata image the controller role applies.
func (b *Broker) ctlScramLookup(mechanism, user string) (sasl.ScramSecret, bool) {
	c := b.ctlImage.Load()
	if c == nil {
		return sasl.ScramSecret{}, false
	}
	s, ok := c.Image().ScramCredential(user, controller.ScramMechanismNamed(mechanism))
	return sasl.ScramSecret{Salt: s.Salt, StoredKey: s.StoredKey, ServerKey: s.ServerKey, Iterations: s.Iterations}, ok
}

// scramLookup serves SCRAM exchanges from the current metadata image.
func (b *Broker) scramLookup(mechanism, user string) (sasl.ScramSecret, bool) {
	s, ok := b.image().ScramCredential(user, controller.ScramMechanismNamed(mechanism))
	return sasl.ScramSecret{Salt: s.Salt, StoredKey: s.StoredKey, ServerKey: s.ServerKey, Iterations: s.Iterations}, ok
}
