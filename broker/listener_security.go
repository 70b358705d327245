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
	"github.com/fjordlog/fjord/broker/tlsconf"
	"github.com/fjordlog/fjord/protocol"
)

// SecurityProtocols are Kafka's listener security protocols.
var SecurityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// Listener names are matched as Kafka matches them (ListenerName and
// KafkaConfig):
//   - the names in listeners and advertised.listeners, the keys of
//     listener.security.protocol.map and inter.broker.listener.name are
//     upper-cased (ListenerName.normalised), so client://, CLIENT:SSL and
//     inter.broker.listener.name=Client all name one listener;
//   - controller.listener.names is compared as written with those
//     upper-cased names, so a lower-case entry names no listener (Kafka
//     then refuses to start; Validate says so);
//   - the listener.name.<l>. prefix of per-listener keys uses the
//     lower-case name (tlsconf, sasl).
//
// A listener name that the map does not give a protocol stops start-up,
// as in Kafka ("No security protocol defined for listener"): serving it as
// PLAINTEXT would silently drop the security its author meant it to have.

// NormaliseListenerName is a listener name as Kafka compares it.
func NormaliseListenerName(name string) string {
	return strings.ToUpper(strings.TrimSpace(name))
}

// ParseProtocolMap parses listener.security.protocol.map: NAME:PROTOCOL
// pairs, names normalised (NormaliseListenerName) and protocols
// case-insensitive. A name given twice with different protocols (Kafka
// refuses client:SSL,CLIENT:PLAINTEXT, and keeps the last of two equal
// spellings) is refused: either way one of the two is silently wrong.
func ParseProtocolMap(s string) (map[string]string, error) {
	out := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		name, proto, ok := strings.Cut(strings.TrimSpace(item), ":")
		name, proto = NormaliseListenerName(name), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" || !slices.Contains(SecurityProtocols, proto) {
			return nil, fmt.Errorf("%q: want NAME:PROTOCOL with PROTOCOL one of %s", item, strings.Join(SecurityProtocols, ", "))
		}
		if prev, dup := out[name]; dup && prev != proto {
			return nil, fmt.Errorf("listener %s is given twice, as %s and as %s (names are compared in upper case)", name, prev, proto)
		}
		out[name] = proto
	}
	return out, nil
}

// protocolMap is the listener.security.protocol.map in force, as Kafka's
// effectiveListenerSecurityProtocolMap builds it: the map given, else
// Kafka's default (each protocol's own name mapped to it) plus, when no
// controller.listener.names entry and no listener is named SSL,
// SASL_PLAINTEXT or SASL_SSL, every controller.listener.names entry mapped
// to PLAINTEXT, so a plaintext KRaft cluster needs no map. Those entries
// are added as written, as Kafka adds them; a lower-case one is refused
// by Validate anyway. An empty value counts as not given (Kafka would
// take it as an empty map and refuse every listener).
func (c *Config) protocolMap() (map[string]string, error) {
	if strings.TrimSpace(c.ListenerSecurityProtocolMap) != "" {
		return ParseProtocolMap(c.ListenerSecurityProtocolMap)
	}
	out := map[string]string{}
	for _, p := range SecurityProtocols {
		out[p] = p
	}
	sslOrSASL := func(name string) bool { return name != "PLAINTEXT" && slices.Contains(SecurityProtocols, name) }
	ctl := c.controllerListenerNames()
	ls, _ := ParseListeners(c.Listeners) // Validate reports a bad value
	if slices.ContainsFunc(ctl, sslOrSASL) || slices.ContainsFunc(ls, func(l Listener) bool { return sslOrSASL(l.Name) }) {
		return out, nil
	}
	for _, n := range ctl {
		if n != "PLAINTEXT" {
			out[n] = "PLAINTEXT"
		}
	}
	return out, nil
}

// controllerListenerNames is controller.listener.names, each entry
// trimmed and kept as written.
func (c *Config) controllerListenerNames() []string {
	var out []string
	for n := range strings.SplitSeq(c.ControllerListenerNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// ListenerProtocol is the security protocol that
// listener.security.protocol.map in force (protocolMap) gives listener
// name, or "" when it gives none: Validate refuses such a configuration
// (checkListenerNames), so on a validated Config every listener, the
// inter-broker one and the controller ones have a protocol.
func (c *Config) ListenerProtocol(name string) string {
	m, err := c.protocolMap()
	if err != nil {
		return ""
	}
	return m[NormaliseListenerName(name)]
}

// checkListenerNames refuses the listener names Kafka would refuse: one
// that listener.security.protocol.map in force leaves without a protocol
// (each error names the listener, where it was named and the fix), and a
// controller.listener.names entry that matches no listener because it is
// not written in upper case.
func (c *Config) checkListenerNames() error {
	m, err := c.protocolMap()
	if err != nil {
		return fmt.Errorf("listener.security.protocol.map: %w", err)
	}
	var errs []error
	for _, n := range c.controllerListenerNames() {
		if n != NormaliseListenerName(n) {
			errs = append(errs, fmt.Errorf("controller.listener.names %q: listener names are compared in upper case, as Kafka does, so it names no listener: write %s", n, NormaliseListenerName(n)))
		}
	}
	type use struct{ name, where string }
	var uses []use
	for _, k := range []struct{ key, value string }{{"listeners", c.Listeners}, {"advertised.listeners", c.AdvertisedListeners}} {
		ls, _ := ParseListeners(k.value) // Validate reports a bad value
		for _, l := range ls {
			uses = append(uses, use{l.Name, k.key})
		}
	}
	if n := NormaliseListenerName(c.InterBrokerListenerName); n != "" {
		uses = append(uses, use{n, "inter.broker.listener.name"})
	}
	if c.HasRole("broker") && !c.HasRole("controller") {
		// A broker reaches the controllers through a listener it does
		// not have itself.
		for _, n := range c.controllerListenerNames() {
			uses = append(uses, use{NormaliseListenerName(n), "controller.listener.names"})
		}
	}
	var names, missing []string
	where := map[string]string{}
	for _, u := range uses {
		if _, seen := where[u.name]; seen {
			continue
		}
		where[u.name] = u.where
		names = append(names, u.name)
		if _, ok := m[u.name]; !ok {
			missing = append(missing, u.name)
		}
	}
	if len(missing) == 0 {
		return errors.Join(errs...)
	}
	// The fix names every listener, so it can be pasted whole: a map given
	// replaces Kafka's default rather than adding to it.
	example := make([]string, len(names))
	for i, n := range names {
		p, ok := m[n]
		if !ok {
			p = "<PROTOCOL>"
		}
		example[i] = n + ":" + p
	}
	fix := "listener.security.protocol.map=" + strings.Join(example, ",")
	protos := strings.Join(SecurityProtocols[:3], ", ") + " or " + SecurityProtocols[3]
	for _, n := range missing {
		if strings.TrimSpace(c.ListenerSecurityProtocolMap) == "" {
			errs = append(errs, fmt.Errorf("no security protocol defined for listener %s (named in %s): listener.security.protocol.map is not set, "+
				"so only PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL and a plaintext cluster's controller listeners have one; set %s (<PROTOCOL>: %s)",
				n, where[n], fix, protos))
		} else {
			errs = append(errs, fmt.Errorf("no security protocol defined for listener %s (named in %s) in listener.security.protocol.map: add it, %s (<PROTOCOL>: %s)",
				n, where[n], fix, protos))
		}
	}
	return errors.Join(errs...)
}

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
	voters, _ := ParseVoters(b.cfg.ControllerQuorumVoters)
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
