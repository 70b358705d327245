package config

import (
	"maps"
	"strings"

	"github.com/fjordlog/fjord/broker/sasl"
)

// oauthKeys are the table rows of the sasl.oauthbearer.* keys of the JWKS
// validator (broker/sasl/oauth_signed.go); listener.name.<l>.<key>
// overrides each for one listener. Static: the JWKS itself is refreshed
// without a restart.
func oauthKeys() []Key {
	out := make([]Key, 0, len(sasl.OAuthKeys))
	for _, k := range sasl.OAuthKeys {
		name, doc := k.Name, k.Doc+" Per listener: listener.name.<l>.oauthbearer."+k.Name+". See docs/security.md."
		if k.Def != "" {
			// As the ssl.* rows: the default is applied where the key is
			// read (Settings.oauthConfig), so an unset key stays unset.
			doc = "Default " + k.Def + ". " + doc
		}
		out = append(out, Key{Name: name, Doc: doc,
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
