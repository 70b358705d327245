package broker

import (
	"fmt"
	"net"
	"strings"

	"github.com/fjordlog/fjord/broker/sasl"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol"
	"github.com/twmb/franz-go/pkg/kgo"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
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
		default:
			return fmt.Errorf("listener %s: security protocol %s is not served", l.Name, l.Protocol)
		}
	}
	return b.buildInterBrokerSASL()
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
	var build func(user, pass string) kgosasl.Mechanism
	switch mech {
	case "PLAIN":
		build = func(u, p string) kgosasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() }
	case "SCRAM-SHA-256":
		build = func(u, p string) kgosasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha256Mechanism() }
	case "SCRAM-SHA-512":
		build = func(u, p string) kgosasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha512Mechanism() }
	default:
		return fmt.Errorf("inter-broker listener %s is SASL: sasl.mechanism.inter.broker.protocol %s is not supported; Fjord's brokers authenticate with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", name, mech)
	}
	user, pass, err := b.cfg.SASL.Login(name, mech)
	if err != nil {
		return fmt.Errorf("inter-broker listener %s (sasl.mechanism.inter.broker.protocol %s): %w", name, mech, err)
	}
	m := build(user, pass)
	b.interBrokerSASL = []kgo.Opt{kgo.SASL(m)}
	b.log.Info().Str("listener", name).Str("mechanism", mech).Str("user", user).Msg("brokers authenticate to each other with SASL")
	return nil
}

// scramLookup serves SCRAM exchanges from the current metadata image.
func (b *Broker) scramLookup(mechanism, user string) (sasl.ScramSecret, bool) {
	s, ok := b.image().ScramCredential(user, controller.ScramMechanismNamed(mechanism))
	return sasl.ScramSecret{Salt: s.Salt, StoredKey: s.StoredKey, ServerKey: s.ServerKey, Iterations: s.Iterations}, ok
}
