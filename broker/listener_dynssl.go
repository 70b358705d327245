package broker

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/tlsconf"
	"github.com/fjordlog/fjord/controller"
)

// Dynamic SSL reconfiguration, as Kafka's: IncrementalAlterConfigs (or
// AlterConfigs) of a broker's own resource with ssl.* keys, or with
// listener.name.<listener>.ssl.* keys for one listener, makes that broker
// load the new stores and serve new connections with them, without a
// restart; open connections keep their certificate. The keys are stored
// in the metadata log like any dynamic broker config, over the node's
// static ones. The whole cluster's default resource cannot hold them: a
// keystore belongs to one node.

// dynamicSSL is the node's ssl.* settings with its own dynamic ones
// (passwords decrypted: config.OpenPasswords) over the static ones.
func (b *Broker) dynamicSSL(dyn map[string]string) map[string]string {
	props := maps.Clone(b.cfg.SSL)
	if props == nil {
		props = map[string]string{}
	}
	for k, v := range dyn {
		if config.IsSSLKey(k) {
			props[k] = strings.TrimSpace(v)
		}
	}
	return props
}

// tlsListeners are the node's TLS sources by listener name: its client
// listeners' and the CONTROLLER listener's.
func (b *Broker) tlsListeners() map[string]*tlsconf.Source {
	out := map[string]*tlsconf.Source{}
	for i, src := range b.tlsSources {
		out[b.advertised[i].Name] = src
	}
	if b.ctlTLS != nil {
		out[b.controllerListener()] = b.ctlTLS
	}
	return out
}

// reconfigureTLS applies img's dynamic ssl.* settings of this node to its
// TLS listeners. Called from the replica manager's Apply (its publish
// loop's goroutine) when the dynamic broker configs change; a listener whose new settings do not
// load keeps its certificate, logged once per such change.
func (b *Broker) reconfigureTLS(img *controller.Image) {
	dyn, err := config.OpenPasswords(b.passwords, img.BrokerConfigs()[strconv.Itoa(int(b.cfg.NodeID))])
	if err != nil {
		b.log.Error().Err(err).Msg("dynamic TLS settings: a stored password does not decrypt with password.encoder.secret (or .old.secret); still serving the previous certificates")
		return
	}
	props := b.dynamicSSL(dyn)
	srcs := b.tlsListeners()
	for _, name := range slices.Sorted(maps.Keys(srcs)) {
		src, s := srcs[name], tlsconf.ForListener(props, name)
		if src.Same(s) {
			continue
		}
		if err := src.Reconfigure(s); err != nil {
			b.log.Error().Err(err).Str("listener", name).Msg("dynamic TLS settings do not load; still serving the previous certificate")
			continue
		}
		b.log.Info().Str("listener", name).Str("subject", src.Subject()).Msg("dynamic TLS settings applied; new connections get the new certificate")
	}
}

// checkDynamicSSL is the receiving broker's check of a change of its own
// ssl.* settings (Kafka validates a dynamic keystore on the broker that
// will serve it): after (this node's dynamic broker configs with the
// change applied, passwords in clear) must load for every TLS listener it
// touches.
func (b *Broker) checkDynamicSSL(after map[string]string) error {
	props := b.dynamicSSL(after)
	for name, src := range b.tlsListeners() {
		s := tlsconf.ForListener(props, name)
		if src.Same(s) {
			continue
		}
		if err := tlsconf.Check(s); err != nil {
			return controller.ConfigError(kerr.InvalidConfig, "%v", err)
		}
	}
	return nil
}
