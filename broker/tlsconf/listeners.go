package tlsconf

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// ListenerConfig says which of a node's listeners run TLS and where their
// settings come from; the broker builds it from its configuration.
type ListenerConfig struct {
	// SSL are the node's static ssl.* and listener.name.<l>.ssl.* keys.
	SSL map[string]string
	// Client are the names of the client listeners that run TLS (SSL or
	// SASL_SSL), in listener order: the order of their start-up checks,
	// log lines and watchers.
	Client []string
	// Controller is the CONTROLLER listener's name (the first of
	// controller.listener.names); ControllerTLS says whether it runs TLS,
	// which matters on every node: a controller serves it (and dials the
	// other voters with it), a broker dials the controllers with it.
	Controller    string
	ControllerTLS bool
	// ReloadInterval is how often Watchers look at the store files
	// (fjord.ssl.reload.check.interval.ms); 0 or less: never.
	ReloadInterval time.Duration
	// Decrypt opens the password-type values of the node's stored dynamic
	// broker configs (Reconfigure); nil leaves them as stored.
	Decrypt func(map[string]string) (map[string]string, error)
	Log     zerolog.Logger
}

// Listeners are the live TLS configurations of a node's TLS listeners: its
// client listeners' by name, and its CONTROLLER listener's. The set of
// listeners is fixed once Open returns; each Source's stores change
// (Watch, Reconfigure) but the Source does not.
//
// A nil *Listeners has no TLS listener: every method answers as for a
// node without one.
type Listeners struct {
	cfg     ListenerConfig
	clients map[string]*Source // by name; one per cfg.Client
	ctl     *Source            // nil unless cfg.ControllerTLS
	dials   dialState
}

// Open reads the stores of every TLS listener: a store that is missing,
// has a wrong password or a setting Go cannot honour is an error naming
// the listener, which stops start-up before anything is served. The
// client listeners are checked first, in order, then the CONTROLLER
// listener; each one loaded is logged with its certificate's subject.
func Open(cfg ListenerConfig) (*Listeners, error) {
	l := &Listeners{cfg: cfg, clients: map[string]*Source{}}
	for _, name := range cfg.Client {
		src, err := Load(ForListener(cfg.SSL, name))
		if err != nil {
			return nil, err
		}
		l.clients[name] = src
		cfg.Log.Info().Str("listener", name).Str("subject", src.Subject()).Msg("TLS listener")
	}
	if !cfg.ControllerTLS {
		return l, nil
	}
	// The settings are the listener's own (listener.name.controller.ssl.*)
	// or the broker-wide ssl.*, so one keystore and truststore serve both
	// directions and ssl.client.auth=required works between controllers.
	src, err := Load(ForListener(cfg.SSL, cfg.Controller))
	if err != nil {
		return nil, err
	}
	l.ctl = src
	cfg.Log.Info().Str("listener", cfg.Controller).Str("subject", src.Subject()).Msg("TLS controller listener")
	return l, nil
}

// Server is client listener name's protocol.ServerConfig TLS hooks; nil
// for a plaintext listener.
func (l *Listeners) Server(name string) (func() *tls.Config, func(*tls.ConnectionState) string) {
	if l == nil || l.clients[name] == nil {
		return nil, nil
	}
	src := l.clients[name]
	return src.Server, src.Principal
}

// ControllerServer is the CONTROLLER listener's per-connection TLS
// configuration, nil when it is plaintext.
func (l *Listeners) ControllerServer() func() *tls.Config {
	if l == nil || l.ctl == nil {
		return nil
	}
	return l.ctl.Server
}

// ControllerPrincipal maps a client certificate on the CONTROLLER
// listener to its principal, as the client listeners do; nil when it is
// not TLS.
func (l *Listeners) ControllerPrincipal() func(*tls.ConnectionState) string {
	if l == nil || l.ctl == nil {
		return nil
	}
	return l.ctl.Principal
}

// ControllerVerifiesClients reports whether the CONTROLLER listener runs
// TLS with ssl.client.auth=required: whether a certificate tells its
// callers apart.
func (l *Listeners) ControllerVerifiesClients() bool {
	return l != nil && l.ctl != nil && l.ctl.Server().ClientAuth == tls.RequireAndVerifyClientCert
}

// Watchers are the loops that reload the stores of each listener when
// their files change (every ReloadInterval) until ctx ends: the CONTROLLER
// listener's when controller is set, else the client listeners' (in
// listener order). The caller runs each on a goroutine it tracks.
func (l *Listeners) Watchers(ctx context.Context, controller bool) []func() {
	if l == nil {
		return nil
	}
	watch := func(name string, src *Source) func() {
		return func() { src.Watch(ctx, l.cfg.ReloadInterval, l.cfg.Log.With().Str("listener", name).Logger()) }
	}
	if controller {
		if l.ctl == nil {
			return nil
		}
		return []func(){watch(l.cfg.Controller, l.ctl)}
	}
	var out []func()
	for _, name := range l.cfg.Client {
		out = append(out, watch(name, l.clients[name]))
	}
	return out
}

// Dialer is the dial function of this node's connections to other
// brokers' listener name (replication, transaction markers) when name is
// a TLS client listener, else nil: it trusts the listener's truststore
// and presents its keystore's certificate, as Kafka's inter-broker
// clients do. Every broker of a cluster has the same inter-broker
// listener name, so this node's own settings for it describe the peer's.
func (l *Listeners) Dialer(name string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if l == nil || l.clients[name] == nil {
		return nil
	}
	src := l.clients[name]
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return l.dial(ctx, src, name, network, addr)
	}
}

// DialController connects to a controller's CONTROLLER listener: TLS when
// it is, else plain TCP. Raft's connections and the broker's Kafka
// requests to the controllers both use it.
func (l *Listeners) DialController(ctx context.Context, network, addr string) (net.Conn, error) {
	if l == nil || l.ctl == nil {
		d := net.Dialer{Timeout: 2 * time.Second}
		return d.DialContext(ctx, network, addr)
	}
	return l.dial(ctx, l.ctl, l.cfg.Controller, network, addr)
}

// dial connects to addr, a peer's listener name whose settings src
// holds, and completes the TLS handshake: it trusts the truststore,
// presents the keystore's certificate and checks the peer's host name
// unless ssl.endpoint.identification.algorithm is empty.
func (l *Listeners) dial(ctx context.Context, src *Source, name, network, addr string) (net.Conn, error) {
	cfg := src.Client().Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil && cfg.ServerName == "" {
		cfg.ServerName = host
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: cfg}
	c, err := d.DialContext(ctx, network, addr)
	l.dials.note(l.cfg.Log, name, addr, err)
	return c, err
}

// dialState remembers, per peer address, whether the last TLS dial to it
// failed, so that a failing handshake (an untrusted or misnamed
// certificate) is logged once when it starts and once when it ends, not
// at every retry of the fetchers.
type dialState struct {
	mu     sync.Mutex
	failed map[string]string // addr -> the error last logged
}

func (s *dialState) note(log zerolog.Logger, listener, addr string, err error) {
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
		log.Warn().Err(err).Str("listener", listener).Str("peer", addr).Msg("TLS connection to a peer's listener failed; retrying")
	case err == nil && was:
		delete(s.failed, addr)
		log.Info().Str("listener", listener).Str("peer", addr).Msg("TLS connection to a peer's listener works again")
	}
}
