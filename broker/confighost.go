package broker

import (
	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/pwenc"
	"github.com/fjordlog/fjord/broker/tlsconf"
	"github.com/fjordlog/fjord/controller"
)

// configHost is what the configuration APIs (their room: broker/config,
// config.APIEntries) need of the broker: forwarding, as forwarder, and
// the node's configuration, image, password encoder, log level and TLS
// listeners.
type configHost struct{ forwarder }

func (h configHost) Image() *controller.Image    { return h.b.image() }
func (h configHost) Static() *config.Config      { return &h.b.cfg }
func (h configHost) Live() *config.Config        { return h.b.live() }
func (h configHost) Passwords() *pwenc.Encoder   { return h.b.passwords }
func (h configHost) LogLevel() zerolog.Level     { return h.b.logLevel.get() }
func (h configHost) SetLogLevel(l zerolog.Level) { h.b.logLevel.set(l) }
func (h configHost) TLS() *tlsconf.Listeners     { return h.b.tls }

func (h configHost) TopicConfigs(name string) (map[string]string, bool) {
	if t := h.b.replicas.Topic(name); t != nil {
		return t.Configs, true
	}
	return nil, false
}
