package tlsconf

import (
	"maps"
	"slices"
	"strings"
)

// Dynamic SSL reconfiguration, as Kafka's: IncrementalAlterConfigs (or
// AlterConfigs) of a broker's own resource with ssl.* keys, or with
// listener.name.<listener>.ssl.* keys for one listener, makes that broker
// load the new stores and serve new connections with them, without a
// restart; open connections keep their certificate. The keys are stored
// in the metadata log like any dynamic broker config, over the node's
// static ones. The whole cluster's default resource cannot hold them: a
// keystore belongs to one node (the broker's config policy says so).

// IsKey reports whether key is a ssl.* key Fjord acts on, broker-wide or
// listener-prefixed.
func IsKey(key string) bool {
	if _, _, ok := ListenerKey(key); ok {
		return true
	}
	return slices.Contains(Keys, key)
}

// overlay is the node's ssl.* settings with its own dynamic ones (dyn,
// passwords in clear) over the static ones.
func (l *Listeners) overlay(dyn map[string]string) map[string]string {
	props := maps.Clone(l.cfg.SSL)
	if props == nil {
		props = map[string]string{}
	}
	for k, v := range dyn {
		if IsKey(k) {
			props[k] = strings.TrimSpace(v)
		}
	}
	return props
}

// all are the node's TLS sources by listener name: its client listeners'
// and the CONTROLLER listener's.
func (l *Listeners) all() map[string]*Source {
	out := maps.Clone(l.clients)
	if out == nil {
		out = map[string]*Source{}
	}
	if l.ctl != nil {
		out[l.cfg.Controller] = l.ctl
	}
	return out
}

// Reconfigure applies the node's dynamic broker configs, as stored
// (password-type values encrypted: cfg.Decrypt opens them), to its TLS
// listeners. The broker calls it whenever its dynamic broker configs
// change, from one goroutine. A listener whose new settings do not load
// keeps its certificate, logged once per such change; so do all of them
// when a password does not decrypt.
func (l *Listeners) Reconfigure(stored map[string]string) {
	if l == nil {
		return
	}
	dyn := stored
	if l.cfg.Decrypt != nil {
		var err error
		if dyn, err = l.cfg.Decrypt(stored); err != nil {
			l.cfg.Log.Error().Err(err).Msg("dynamic TLS settings: a stored password does not decrypt with password.encoder.secret (or .old.secret); still serving the previous certificates")
			return
		}
	}
	props := l.overlay(dyn)
	srcs := l.all()
	for _, name := range slices.Sorted(maps.Keys(srcs)) {
		src, s := srcs[name], ForListener(props, name)
		if src.Same(s) {
			continue
		}
		if err := src.Reconfigure(s); err != nil {
			l.cfg.Log.Error().Err(err).Str("listener", name).Msg("dynamic TLS settings do not load; still serving the previous certificate")
			continue
		}
		l.cfg.Log.Info().Str("listener", name).Str("subject", src.Subject()).Msg("dynamic TLS settings applied; new connections get the new certificate")
	}
}

// CheckDynamic is the receiving broker's check of a change of its own
// ssl.* settings (Kafka validates a dynamic keystore on the broker that
// will serve it): after (this node's dynamic broker configs with the
// change applied, passwords in clear) must load for every TLS listener it
// touches. The error names the listener and the setting.
func (l *Listeners) CheckDynamic(after map[string]string) error {
	if l == nil {
		return nil
	}
	props := l.overlay(after)
	srcs := l.all()
	for _, name := range slices.Sorted(maps.Keys(srcs)) {
		s := ForListener(props, name)
		if srcs[name].Same(s) {
			continue
		}
		if err := Check(s); err != nil {
			return err
		}
	}
	return nil
}
