package sasl

import (
	"fmt"
	"slices"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ClientMechanism is the node's own SASL identity on listener for
// mechanism mech, as a franz-go mechanism: the username and password
// options of the listener's login module (Login). It serves the node's
// connections to other nodes and `fjord health`; user is for log lines.
func (s Settings) ClientMechanism(listener, mech string) (m kgosasl.Mechanism, user string, err error) {
	var build func(user, pass string) kgosasl.Mechanism
	switch mech {
	case "PLAIN":
		build = func(u, p string) kgosasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() }
	case "SCRAM-SHA-256":
		build = func(u, p string) kgosasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha256Mechanism() }
	case "SCRAM-SHA-512":
		build = func(u, p string) kgosasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha512Mechanism() }
	default:
		return nil, "", fmt.Errorf("mechanism %s is not supported for Fjord's own connections: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
	}
	user, pass, err := s.Login(listener, mech)
	if err != nil {
		return nil, "", err
	}
	return build(user, pass), user, nil
}

// SelfMechanism is the mechanism the node uses to reach its own listener
// (`fjord health`): the inter-broker mechanism if the listener enables it,
// else the first enabled one a node can present (PLAIN or SCRAM).
func (s Settings) SelfMechanism(listener string) (string, error) {
	enabled := s.ListenerMechanisms(listener)
	if ib := s.InterBroker(); slices.Contains(enabled, ib) {
		return ib, nil
	}
	for _, m := range enabled {
		if m == "PLAIN" || m == "SCRAM-SHA-256" || m == "SCRAM-SHA-512" {
			return m, nil
		}
	}
	return "", fmt.Errorf("listener %s enables %v: none is one a node can authenticate itself with (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", listener, enabled)
}
