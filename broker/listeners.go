package broker

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/sasl"
	"github.com/fjordlog/fjord/broker/tlsconf"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol"
)

// The security of the node's listeners: broker/tlsconf loads and reloads
// their TLS stores, broker/sasl builds their SASL servers and the node's
// own identities; this file hands them the configuration and keeps what
// they build.

// secureListeners gives every listener its TLS and SASL, and refuses a
// CONTROLLER listener that cannot tell nodes apart (checkControllerDoor).
// Called by listen once the client listeners are bound (b.advertised),
// before anything is served: a store or a SASL setting that cannot be
// served stops start-up, as serving the listener without it would look
// secure and not be.
func (b *Broker) secureListeners() error {
	ctlName := controllerListener(&b.cfg)
	tlsCfg := tlsconf.ListenerConfig{SSL: b.cfg.SSL, Controller: ctlName, ControllerTLS: isTLS(b.cfg.ListenerProtocol(ctlName)),
		ReloadInterval: time.Duration(b.cfg.SSLReloadCheckMs) * time.Millisecond, Decrypt: func(dyn map[string]string) (map[string]string, error) { return config.OpenPasswords(b.passwords, dyn) }, Log: b.log}
	saslCfg := sasl.ListenerConfig{Settings: b.cfg.SASL,
		Controller: ctlName, ControllerProtocol: b.cfg.ListenerProtocol(ctlName), ServeController: b.cfg.HasRole("controller"),
		Broker: b.cfg.HasRole("broker"), Log: b.log,
		Scram: sasl.ImageScram(b.image),
		ControllerScram: sasl.ImageScram(func() *controller.Image {
			if c := b.ctlImage.Load(); c != nil {
				return c.Image()
			}
			return nil
		}),
		Denied: func(listener int, remote net.Addr, mech, reason string) {
			if listener < 0 {
				listener = api.CtlListener
			}
			b.audit.AuthFailed(listener, remote, mech, reason)
		},
	}
	for _, a := range b.advertised {
		if isTLS(a.Protocol) {
			tlsCfg.Client = append(tlsCfg.Client, a.Name)
		}
		saslCfg.Client = append(saslCfg.Client, sasl.Listener{Name: a.Name, Protocol: a.Protocol})
	}
	var err error
	if b.tls, err = tlsconf.Open(tlsCfg); err != nil {
		return err
	}

	saslCfg.InterBroker = b.interBrokerListener()
	saslCfg.InterBrokerProtocol = b.cfg.ListenerProtocol(saslCfg.InterBroker)
	sl, err := sasl.Build(saslCfg)
	if err != nil {
		return err
	}
	// An interface holding a nil *sasl.Server is not nil: only SASL
	// listeners get one.
	b.saslServers = make([]protocol.Authenticator, len(b.advertised))
	for i, srv := range sl.Servers {
		if srv != nil {
			b.saslServers[i] = srv
		}
	}
	if sl.Controller != nil {
		b.ctlSASLServer = sl.Controller
	}
	b.ctlSASL = sl.ControllerClient
	for _, run := range sl.Runs(b.ctx) {
		b.goLoop(run)
	}

	// This node's connections to other brokers' inter-broker listener
	// (replication, transaction markers): SASL and TLS when it is.
	if sl.InterBroker != nil {
		b.interBrokerOpts = []kgo.Opt{kgo.SASL(sl.InterBroker)}
	}
	if dial := b.tls.Dialer(saslCfg.InterBroker); dial != nil {
		b.interBrokerOpts = append(b.interBrokerOpts, kgo.Dialer(dial))
	}
	b.interBrokerOpts = slices.Clip(b.interBrokerOpts)
	return checkControllerDoor(&b.cfg, b.tls, b.log)
}

// isTLS reports whether a listener protocol runs over TLS.
func isTLS(protocol string) bool { return protocol == "SSL" || protocol == "SASL_SSL" }

// controllerListener is the name of the listener the controllers serve
// brokers and each other on: the first of controller.listener.names, as
// in Kafka.
func controllerListener(c *config.Config) string {
	first, _, _ := strings.Cut(c.ControllerListenerNames, ",")
	return strings.TrimSpace(first)
}

// checkControllerDoor refuses to start a node whose CONTROLLER listener,
// with an authorizer on, cannot tell the cluster's own nodes from anyone
// else. Its Kafka half admits brokers by CLUSTER_ACTION (registration,
// heartbeats, ISR changes, the metadata log with every secret in it), and
// raft admits voters the same way: on a PLAINTEXT listener, or SSL
// without ssl.client.auth=required, every node arrives as User:ANONYMOUS.
// Kafka's answer is User:ANONYMOUS in super.users, which opens the port to
// anyone who can reach it. Fjord instead:
//   - needs no door at all for a quorum of one whose node is also its
//     broker: the broker reaches its controller in process;
//   - refuses to start otherwise, naming the listener and the fix (SASL or
//     mTLS on the controller listener);
//   - starts, with a warning naming the listener, when the operator
//     privileged User:ANONYMOUS explicitly (super.users, or
//     allow.everyone.if.no.acl.found=true): never silently.
func checkControllerDoor(cfg *config.Config, tls *tlsconf.Listeners, log zerolog.Logger) error {
	if cfg.AuthorizerClass == "" {
		return nil
	}
	voters, _ := config.ParseVoters(cfg.ControllerQuorumVoters)
	if len(voters) <= 1 && cfg.HasRole("broker") && cfg.HasRole("controller") {
		return nil
	}
	name := controllerListener(cfg)
	switch proto := cfg.ListenerProtocol(name); {
	case proto == "SASL_PLAINTEXT" || proto == "SASL_SSL":
		return nil
	case proto == "SSL" && tls.ControllerVerifiesClients():
		return nil
	}
	if slices.Contains(acl.ParseSuperUsers(cfg.SuperUsers), protocol.AnonymousPrincipal) || cfg.AllowEveryoneIfNoACL {
		log.Warn().Str("listener", name).Msg("controller listener is not authenticated (no SASL, no ssl.client.auth=required) and User:ANONYMOUS is privileged " +
			"(super.users or allow.everyone.if.no.acl.found): anyone who reaches it can act as a broker or controller; secure it with SASL or mTLS")
		return nil
	}
	return fmt.Errorf("controller listener %s: authorizer.class.name is set but the listener authenticates no one (PLAINTEXT, or SSL without ssl.client.auth=required), "+
		"so the other nodes would reach it as User:ANONYMOUS and be refused; make it SASL_PLAINTEXT/SASL_SSL (sasl.mechanism.controller.protocol) "+
		"or SSL with ssl.client.auth=required, and give the nodes' principal super.users or CLUSTER_ACTION", name)
}
