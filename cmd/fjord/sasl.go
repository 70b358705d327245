package main

import (
	"strings"

	"github.com/fjordlog/fjord/broker/sasl"
)

// takeSASLSettings removes from settings the SASL keys that are not in
// the key table: sasl.jaas.config, fjord.sasl.scram.bootstrap and the listener.name.<l>.… SASL keys
// (sasl.enabled.mechanisms, <mechanism>.sasl.jaas.config,
// oauthbearer.sasl.server.callback.handler.class and sasl.oauthbearer.*
// per listener). They hold passwords, so they are applied apart and never
// reported as static configs.
func takeSASLSettings(settings map[string]setting) sasl.Settings {
	var s sasl.Settings
	for key, v := range settings {
		switch {
		case key == "sasl.jaas.config":
			s.JAASConfig = v.value
		case key == "fjord.sasl.scram.bootstrap":
			s.ScramBootstrap = v.value
		case strings.HasPrefix(key, "listener.name.") && (strings.HasSuffix(key, ".sasl.jaas.config") || strings.HasSuffix(key, ".sasl.enabled.mechanisms") || strings.HasSuffix(key, ".connections.max.reauth.ms") ||
			strings.HasSuffix(key, ".sasl.server.callback.handler.class") || strings.Contains(key, ".sasl.oauthbearer.")):
			// Kafka lower-cases the listener name in these keys; the
			// apache image's env mapping gives them lower-case already.
			if s.Listener == nil {
				s.Listener = map[string]string{}
			}
			s.Listener[strings.ToLower(key)] = v.value
		default:
			continue
		}
		delete(settings, key)
	}
	return s
}

// noScram stands for the metadata image when a SASL listener is checked
// at start-up: SCRAM credentials are looked up only once the node serves.
func noScram(string, string) (sasl.ScramSecret, bool) { return sasl.ScramSecret{}, false }
