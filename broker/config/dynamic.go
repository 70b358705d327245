package config

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config/catalogue"
	"github.com/fjordlog/fjord/broker/tlsconf"
	"github.com/fjordlog/fjord/controller"
)

// Dynamic configs: AlterConfigs stores broker and topic configs in the
// metadata log (SetConfig records), so every node applies them and a
// restart keeps them. A node's running configuration is its static one
// (defaults, file, environment, flags) with the image's dynamic broker
// configs over it: first the cluster-wide default (resource ""), then this
// node's own. The broker's replica manager recomputes it (Live) with each
// image that changes them, and topics' replicas take the settings that
// follow from it.

// Layer is where a broker key's value comes from, in rising priority.
type Layer uint8

const (
	LayerDefault Layer = iota
	LayerStatic
	LayerClusterDefault
	LayerBroker
)

// Source is the layer's DescribeConfigs source.
func (l Layer) Source() kmsg.ConfigSource {
	switch l {
	case LayerStatic:
		return kmsg.ConfigSourceStaticBrokerConfig
	case LayerClusterDefault:
		return kmsg.ConfigSourceDynamicDefaultBrokerConfig
	case LayerBroker:
		return kmsg.ConfigSourceDynamicBrokerConfig
	}
	return kmsg.ConfigSourceDefaultConfig
}

// Layers are a node's broker keys by layer: the keys given at start
// (Config.Static), the image's cluster default and this node's own. The
// maps are the static config's and the image's: read-only.
type Layers [4]map[string]string

// LayersOf are the layers of the node whose static config is static, in
// img (nil: the static layer alone).
func LayersOf(static *Config, img *controller.Image) Layers {
	var ls Layers
	ls[LayerStatic] = static.Static
	if img != nil {
		dyn := img.BrokerConfigs()
		ls[LayerClusterDefault] = dyn[""]
		ls[LayerBroker] = dyn[strconv.Itoa(int(static.NodeID))]
	}
	return ls
}

// Lookup is a key's value and the layer it comes from, searching the
// layers from the top; LayerDefault (with ok false) when none has it.
func (ls Layers) Lookup(key string) (string, Layer, bool) {
	for l := LayerBroker; l > LayerDefault; l-- {
		if v, ok := ls[l][key]; ok {
			return v, l, true
		}
	}
	return "", LayerDefault, false
}

// Synonyms lists key and the keys that write the same field, highest
// priority first (log.retention.ms, .minutes, .hours).
func Synonyms(key string) []string {
	k, ok := LookupKey(key)
	if !ok {
		return []string{key}
	}
	head := key
	if k.Of != "" {
		head = k.Of
	}
	var out []string
	for _, c := range configKeys {
		if c.Name == head || c.Of == head {
			out = append(out, c.Name)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		ka, _ := LookupKey(a)
		kb, _ := LookupKey(b)
		return kb.Prio - ka.Prio
	})
	return out
}

// Live is the static config with img's dynamic layers applied. As in
// Kafka, the layers merge key by key (a higher layer's value of a key wins)
// and then, among synonyms, the highest-priority key present wins: a static
// log.retention.ms outranks a dynamic log.retention.hours. A dynamic value
// that no longer parses (it was checked when it was stored) is skipped,
// with a warning on log.
func Live(static *Config, img *controller.Image, log zerolog.Logger) Config {
	c := *static
	ls := LayersOf(static, img)
	apply := map[string]string{}
	seen := map[string]bool{}
	for _, l := range []Layer{LayerBroker, LayerClusterDefault} {
		for _, k := range slices.Sorted(maps.Keys(ls[l])) {
			if seen[k] {
				continue
			}
			seen[k] = true
			ck, ok := LookupKey(k)
			if !ok || !ck.Dynamic || IsPasswordKey(k) {
				// A stored password is ciphertext: only TLS reads
				// passwords, decrypted (tlsconf.Listeners.Reconfigure).
				continue
			}
			// The synonym that wins, over every layer.
			winner := ""
			for _, s := range Synonyms(k) {
				if _, _, ok := ls.Lookup(s); ok {
					winner = s
					break
				}
			}
			if winner == k {
				apply[k] = ls[l][k]
			}
		}
	}
	for k, v := range apply {
		var scratch = c
		if err := applyKeys(&scratch, map[string]string{k: v}); err != nil {
			log.Warn().Str("key", k).Str("value", v).Err(err).Msg("ignoring a dynamic broker config that does not parse")
			continue
		}
		c = scratch
	}
	return c
}

// Policy is what the active controller judges AlterConfigs by; live is
// the node's running configuration, read at each judgement (a topic's list
// key defaults to the running broker default; a group's overrides must lie
// within its bounds, groups.go).
func Policy(live func() *Config) controller.ConfigPolicy {
	return controller.ConfigPolicy{
		Check: func(res controller.ConfigResource, key, value string) error {
			if res.Type == controller.ResourceGroup {
				return checkGroupKey(key, value)
			}
			return checkConfig(res, key, value)
		},
		List: func(res controller.ConfigResource, key string) (bool, string) {
			return isListConfig(live(), res, key)
		},
		CheckResource: func(res controller.ConfigResource, old, configs map[string]string) error {
			switch res.Type {
			case controller.ResourceGroup:
				return checkGroupConfigs(live(), configs)
			case controller.ResourceTopic:
				if old == nil {
					old = map[string]string{} // an existing topic: not a creation
				}
				return CheckTieredTopic(live(), old, configs)
			}
			return nil
		},
	}
}

// checkConfig judges one new value of a key for a topic or a broker; a
// broker's password must also come encrypted (checkSealed).
func checkConfig(res controller.ConfigResource, key, value string) error {
	if err := checkConfigValue(res, key, value); err != nil || res.Type == controller.ResourceTopic {
		return err
	}
	return checkSealed(key, value)
}

// checkConfigValue judges what a key and its value mean.
func checkConfigValue(res controller.ConfigResource, key, value string) error {
	if res.Type == controller.ResourceTopic {
		return checkTopicConfig(key, value)
	}
	if tlsconf.IsKey(key) {
		return checkSSLConfig(res, key)
	}
	if key == "super.users" && res.Name != "" {
		return controller.ConfigError(kerr.InvalidConfig, "super.users may be changed for the whole cluster only (the default broker resource, name \"\"), so that every node agrees on who is a super user")
	}
	return checkBrokerConfig(key, value)
}

// checkTopicConfig: a topic key Fjord implements must have a valid value;
// another Kafka key is stored (Fjord does not act on it) when ignoring it
// is safe and refused as a policy violation when it is not.
func checkTopicConfig(key, value string) error {
	if key == "unclean.leader.election.enable" && strings.EqualFold(strings.TrimSpace(value), "true") {
		return controller.ConfigError(kerr.PolicyViolation, "%s=%s: Fjord never elects a leader outside the ISR, which would lose acknowledged records", key, value)
	}
	if d := FindTopicKey(key); d != nil {
		if err := d.check(value); err != nil {
			return controller.ConfigError(kerr.InvalidConfig, "%s: %v", key, err)
		}
		return nil
	}
	verdict, known := catalogue.Classify(catalogue.Topic, key, value)
	switch {
	case !known:
		return controller.ConfigError(kerr.InvalidConfig, "unknown topic config %q", key)
	case verdict.Class == catalogue.Refused:
		return controller.ConfigError(kerr.PolicyViolation, "%s=%s: %s", key, value, verdict.Why)
	}
	if k, ok := catalogue.Lookup(catalogue.Topic, key); ok {
		if err := catalogue.CheckValue(k, value); err != nil {
			return controller.ConfigError(kerr.InvalidConfig, "%s: %v", key, err)
		}
	}
	return nil
}

// checkBrokerConfig: only the dynamic keys Fjord acts on may change at run
// time; their values must parse, and a value Fjord refuses as unsafe
// (unclean.leader.election.enable=true) is a policy violation.
func checkBrokerConfig(key, value string) error {
	k, ok := LookupKey(key)
	if !ok {
		ck, known := catalogue.Lookup(catalogue.Broker, key)
		if !known {
			return controller.ConfigError(kerr.InvalidConfig, "unknown broker config %q", key)
		}
		verdict, _ := catalogue.Classify(catalogue.Broker, key, value)
		if kafkaDynamicIgnored[key] && verdict.Class == catalogue.Ignored {
			if err := catalogue.CheckValue(ck, value); err != nil {
				return controller.ConfigError(kerr.InvalidConfig, "%s: %v", key, err)
			}
			return nil
		}
		return controller.ConfigError(kerr.InvalidConfig, "%s: Fjord does not change this key at run time (%s)", key, verdict.Why)
	}
	if !k.Dynamic {
		return controller.ConfigError(kerr.InvalidConfig, "%s is read-only: cannot update it dynamically, set it in the node's configuration and restart", key)
	}
	scratch := Default()
	if err := k.Set(&scratch, strings.TrimSpace(value)); err != nil {
		if key == "unclean.leader.election.enable" {
			return controller.ConfigError(kerr.PolicyViolation, "%s=%s: %v", key, value, err)
		}
		return controller.ConfigError(kerr.InvalidConfig, "%s: %v", key, err)
	}
	if err := scratch.Validate(); err != nil {
		return controller.ConfigError(kerr.InvalidConfig, "%s: %v", key, err)
	}
	return nil
}

// kafkaDynamicIgnored are Kafka's dynamic broker keys that size what Fjord
// does not have (thread pools, the cleaner's buffers, metric reporters).
// AlterConfigs stores them, as Kafka would, so tools that tune them do not
// fail; Fjord does not act on them, as it ignores them at start-up.
var kafkaDynamicIgnored = map[string]bool{
	"background.threads": true, "num.network.threads": true, "num.replica.fetchers": true,
	"num.recovery.threads.per.data.dir": true, "log.cleaner.threads": true,
	"log.cleaner.dedupe.buffer.size": true, "log.cleaner.io.buffer.size": true,
	"log.cleaner.io.buffer.load.factor": true, "log.cleaner.io.max.bytes.per.second": true,
	"metric.reporters": true,
}

// isListConfig reports whether a key is of Kafka's LIST type, and its
// default as Fjord applies it (for a topic, the running broker default).
func isListConfig(live *Config, res controller.ConfigResource, key string) (bool, string) {
	if res.Type == controller.ResourceGroup {
		return false, "" // no group key is a list
	}
	scope := catalogue.Broker
	if res.Type == controller.ResourceTopic {
		scope = catalogue.Topic
	}
	k, ok := catalogue.Lookup(scope, key)
	if !ok || k.Type != "list" {
		return false, ""
	}
	if res.Type == controller.ResourceTopic {
		if d := FindTopicKey(key); d != nil {
			return true, d.def(live)
		}
	} else if ck, ok := LookupKey(key); ok {
		return true, ck.Def
	}
	return true, k.Default
}
