package broker

import (
	"maps"
	"strings"

	"github.com/fjordlog/fjord/broker/sasl"
)

// oauthKeys are the table rows of the sasl.oauthbearer.* keys of the JWKS
// validator (broker/sasl/oauth_signed.go); listener.name.<l>.<key>
// overrides each for one listener. Static: the JWKS itself is refreshed
// without a restart.
func oauthKeys() []ConfigKey {
	out := make([]ConfigKey, 0, len(sasl.OAuthKeys))
	for _, k := range sasl.OAuthKeys {
		name := k.Name
		out = append(out, ConfigKey{Name: name, Def: k.Def, Doc: k.Doc + " See docs/security.md.",
			Set: func(c *Config, v string) error {
				m := maps.Clone(c.SASL.OAuth)
				if m == nil {
					m = map[string]string{}
				}
				m[name] = strings.TrimSpace(v)
				c.SASL.OAuth = m
				return nil
			}})
	}
	return out
}
