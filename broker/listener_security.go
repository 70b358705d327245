package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/tlsconf"
	"github.com/fjordlog/fjord/protocol"
)

// isTLS reports whether a listener protocol runs over TLS.
func isTLS(protocol string) bool { return protocol == "SSL" || protocol == "SASL_SSL" }

// loadTLS reads the stores of every TLS client listener: a store that is
// missing, has a wrong password or a setting Go cannot honour stops
// start-up. Called by listen, before anything is served.
func (b *Broker) loadTLS() error {
	for i, a := range b.advertised {
		if !isTLS(a.Protocol) {
			continue
		}
		src, err := tlsconf.Load(tlsconf.ForListener(b.cfg.SSL, a.Name))
		if err != nil {
			return err
		}
		if b.tlsSources == nil {
			b.tlsSources = map[int]*tlsconf.Source{}
		}
		b.tlsSources[i] = src
		b.log.Info().Str("listener", a.Name).Str("subject", src.Subject()).Msg("TLS listener")
	}
	return nil
}

// watchControllerTLS reloads the CONTROLLER listener's stores when their
// files change.
func (b *Broker) watchControllerTLS() {
	if src, name := b.ctlTLS, b.controllerListener(); src != nil {
		b.goLoop(func() {
			src.Watch(b.ctx, time.Duration(b.cfg.SSLReloadCheckMs)*time.Millisecond, b.log.With().Str("listener", name).Logger())
		})
	}
}

// watchTLS reloads each TLS listener's stores when their files change.
func (b *Broker) watchTLS() {
	for _, i := range slices.Sorted(maps.Keys(b.tlsSources)) {
		src, name := b.tlsSources[i], b.advertised[i].Name
		b.goLoop(func() {
			src.Watch(b.ctx, time.Duration(b.cfg.SSLReloadCheckMs)*time.Millisecond, b.log.With().Str("listener", name).Logger())
		})
	}
}

// tlsServer is a listener's protocol.ServerConfig TLS hooks; nil for a
// plaintext listener.
func (b *Broker) tlsServer(i int) (func() *tls.Config, func(*tls.ConnectionState) string) {
	src := b.tlsSources[i]
	if src == nil {
		return nil, nil
	}
	return src.Server, src.Principal
}

// interBrokerOpts are the client options for this node's connections to
// other brokers' inter-broker listener (replication, transaction markers):
// TLS when that listener is, trusting its truststore and presenting its
// keystore's certificate, as Kafka's inter-broker clients do. Every broker
// of a cluster has the same inter-broker listener name, so this node's own
// settings for it describe the peer's.
func (b *Broker) interBrokerOpts() []kgo.Opt {
	name := b.interBrokerListener()
	for i, a := range b.advertised {
		if a.Name == name && b.tlsSources[i] != nil {
			src := b.tlsSources[i]
			return append(slices.Clip(b.interBrokerSASL), kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
				return b.dialTLS(ctx, src, name, network, addr)
			}))
		}
	}
	return b.interBrokerSASL
}

// dialTLS connects to addr, a peer's listener name whose settings src
// holds, and completes the TLS handshake: it trusts the truststore,
// presents the keystore's certificate and checks the peer's host name
// unless ssl.endpoint.identification.algorithm is empty.
func (b *Broker) dialTLS(ctx context.Context, src *tlsconf.Source, name, network, addr string) (net.Conn, error) {
	cfg := src.Client().Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil && cfg.ServerName == "" {
		cfg.ServerName = host
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: cfg}
	c, err := d.DialContext(ctx, network, addr)
	b.tlsDialState.note(b, name, addr, err)
	return c, err
}

// controllerListener is the name of the listener the controllers serve
// brokers and each other on: the first of controller.listener.names, as
// in Kafka.
func (b *Broker) controllerListener() string {
	first, _, _ := strings.Cut(b.cfg.ControllerListenerNames, ",")
	return strings.TrimSpace(first)
}

// loadControllerTLS reads the CONTROLLER listener's stores when it is TLS,
// on every node: a controller serves it (and dials the other voters with
// it), a broker dials the controllers with it. The settings are the
// listener's own (listener.name.controller.ssl.*) or the broker-wide
// ssl.*, so one keystore and truststore serve both directions and
// ssl.client.auth=required works between controllers.
func (b *Broker) loadControllerTLS() error {
	name := b.controllerListener()
	if !isTLS(b.cfg.ListenerProtocol(name)) {
		return nil
	}
	src, err := tlsconf.Load(tlsconf.ForListener(b.cfg.SSL, name))
	if err != nil {
		return err
	}
	b.ctlTLS = src
	b.log.Info().Str("listener", name).Str("subject", src.Subject()).Msg("TLS controller listener")
	return nil
}

// ctlDial connects to a controller's CONTROLLER listener: TLS when it is,
// else plain TCP. Raft's connections and the broker's Kafka requests to
// the controllers both use it.
func (b *Broker) ctlDial(ctx context.Context, network, addr string) (net.Conn, error) {
	if b.ctlTLS == nil {
		d := net.Dialer{Timeout: 2 * time.Second}
		return d.DialContext(ctx, network, addr)
	}
	return b.dialTLS(ctx, b.ctlTLS, b.controllerListener(), network, addr)
}

// ctlServerTLS is the CONTROLLER listener's per-connection TLS
// configuration, nil when it is plaintext.
func (b *Broker) ctlServerTLS() func() *tls.Config {
	if b.ctlTLS == nil {
		return nil
	}
	return b.ctlTLS.Server
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
func (b *Broker) checkControllerDoor() error {
	if b.cfg.AuthorizerClass == "" {
		return nil
	}
	voters, _ := config.ParseVoters(b.cfg.ControllerQuorumVoters)
	if len(voters) <= 1 && b.cfg.HasRole("broker") && b.cfg.HasRole("controller") {
		return nil
	}
	name := b.controllerListener()
	switch proto := b.cfg.ListenerProtocol(name); {
	case proto == "SASL_PLAINTEXT" || proto == "SASL_SSL":
		return nil
	case proto == "SSL" && b.ctlTLS != nil && b.ctlTLS.Server().ClientAuth == tls.RequireAndVerifyClientCert:
		return nil
	}
	if slices.Contains(acl.ParseSuperUsers(b.cfg.SuperUsers), protocol.AnonymousPrincipal) || b.cfg.AllowEveryoneIfNoACL {
		b.log.Warn().Str("listener", name).Msg("controller listener is not authenticated (no SASL, no ssl.client.auth=required) and User:ANONYMOUS is privileged " +
			"(super.users or allow.everyone.if.no.acl.found): anyone who reaches it can act as a broker or controller; secure it with SASL or mTLS")
		return nil
	}
	return fmt.Errorf("controller listener %s: authorizer.class.name is set but the listener authenticates no one (PLAINTEXT, or SSL without ssl.client.auth=required), "+
		"so the other nodes would reach it as User:ANONYMOUS and be refused; make it SASL_PLAINTEXT/SASL_SSL (sasl.mechanism.controller.protocol) "+
		"or SSL with ssl.client.auth=required, and give the nodes' principal super.users or CLUSTER_ACTION", name)
}

// tlsDialState remembers, per peer address, whether the last inter-broker
// TLS dial failed, so that a failing handshake (an untrusted or misnamed
// certificate) is logged once when it starts and once when it ends, not
// at every retry of the fetchers.
type tlsDialState struct {
	mu     sync.Mutex
	failed map[string]string // addr -> the error last logged
}

func (s *tlsDialState) note(b *Broker, listener, addr string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, was := s.failed[addr]
	switch {
	case err != nil && errors.Is(err, context.Canceled):
	case err != nil && (!was || prev != err.Error()):
		if s.failed == nil {
			s.failed = map[string]string{}
		}
		s.failed[addr] = err.Error()
		b.log.Warn().Err(err).Str("listener", listener).Str("peer", addr).Msg("TLS connection to a peer's listener failed; retrying")
	case err == nil && was:
		delete(s.failed, addr)
		b.log.Info().Str("listener", listener).Str("peer", addr).Msg("TLS connection to a peer's listener works again")
	}
}
