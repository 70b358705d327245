package broker

import (
	"fmt"
	"strings"

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
		case "PLAINTEXT":
		case "SASL_PLAINTEXT":
			srv, err := sasl.NewServer(b.cfg.SASL, l.Name, b.scramLookup)
			if err != nil {
				return err
			}
			b.saslServers[i] = srv
			b.log.Info().Str("listener", l.Name).Str("mechanisms", strings.Join(srv.Mechanisms(), ",")).Msg("SASL required")
		default:
			return fmt.Errorf("listener %s: security protocol %s is not served", l.Name, l.Protocol)
		}
	}
	return nil
}

// scramLookup serves SCRAM exchanges from the current metadata image.
func (b *Broker) scramLookup(mechanism, user string) (sasl.ScramSecret, bool) {
	s, ok := b.image().ScramCredential(user, controller.ScramMechanismNamed(mechanism))
	return sasl.ScramSecret{Salt: s.Salt, StoredKey: s.StoredKey, ServerKey: s.ServerKey, Iterations: s.Iterations}, ok
}
