package config

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/config/catalogue"
)

// DescribeConfigs: v0-4
//
// Behaviour:
//   - Topics (resource type 2): every topic config Fjord implements with
//     its effective value, and every other Kafka key stored with the
//     topic. An override's source is DYNAMIC_TOPIC_CONFIG; a default takes
//     the source of the broker key it comes from (DYNAMIC_BROKER_CONFIG,
//     DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG).
//   - Brokers (resource type 4): this node's id gives every broker key
//     Fjord implements, each with the value of its highest source, the
//     keys that cannot change at run time marked read-only. The name ""
//     gives only the cluster-wide dynamic defaults, as Kafka does. Another
//     broker's id is INVALID_REQUEST (clients send it to that broker).
//   - BROKER_LOGGER (resource type 8): this node's loggers and levels.
//   - Groups (resource type 32; KIP-848, KIP-932): every group config
//     Fjord serves (groups.go; not the streams.* keys it refuses) with
//     the value the group runs with here, whether or not the group
//     exists. An override's source is GROUP_CONFIG (8); a default takes
//     the source of the group.* broker key it comes from
//     (STATIC_BROKER_CONFIG or DEFAULT_CONFIG), or DEFAULT_CONFIG for
//     share.auto.offset.reset and share.isolation.level, which have none
//     (Kafka's ConfigHelper.createGroupConfigEntry). Other keys stored
//     for the group are listed too. The group id "" is INVALID_REQUEST.
//   - Synonyms (when asked) list, highest first, every source of the key
//     and of its synonyms (log.retention.ms, .minutes, .hours), ending with
//     the default. ConfigNames restricts the answer; other resource types
//     get INVALID_REQUEST.
//
// Version notes:
//   - v1: synonyms, source; v3: documentation, config type; v4: flexible
func describeConfigsEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 32, Client: api.Versions(0, 4), Handle: bindTo(h, handleDescribeConfigs),
		Rule: api.Needs("DESCRIBE_CONFIGS on TOPIC, on GROUP for group configs, or on CLUSTER for broker configs", 1, checkDescribeConfigs),
	}
}

func handleDescribeConfigs(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	img := h.Image()
	d := describer{ls: LayersOf(h.Static(), img), live: h.Live(), synonyms: req.IncludeSynonyms, docs: req.IncludeDocumentation}
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		d.want = rr.ConfigNames
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			overrides, ok := h.TopicConfigs(rr.ResourceName)
			if !ok {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			sr.Configs = d.topic(overrides)
		case kmsg.ConfigResourceTypeBroker:
			switch rr.ResourceName {
			case "":
				sr.Configs = d.clusterDefaults()
			case strconv.Itoa(int(h.Static().NodeID)):
				sr.Configs = d.broker()
			default:
				sr.ErrorCode = kerr.InvalidRequest.Code
				m := "broker " + rr.ResourceName + ": this is broker " + strconv.Itoa(int(h.Static().NodeID)) + "; send it to the broker it names"
				sr.ErrorMessage = &m
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			if rr.ResourceName == "" {
				sr.ErrorCode, sr.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("group name must not be empty")
				break
			}
			var overrides map[string]string
			if img != nil {
				overrides = img.GroupConfigs(rr.ResourceName)
			}
			sr.Configs = d.group(overrides)
		case kmsg.ConfigResourceTypeBrokerLogger:
			if rr.ResourceName != strconv.Itoa(int(h.Static().NodeID)) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				break
			}
			if d.wanted(rootLogger) {
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				v := log4jName(h.LogLevel())
				c.Name, c.Value, c.Source = rootLogger, &v, kmsg.ConfigSourceDynamicBrokerLoggerConfig
				sr.Configs = append(sr.Configs, c)
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
		}
		resp.Resources = append(resp.Resources, sr)
	}
	respond(resp)
}

// describer renders config entries for one request.
type describer struct {
	ls       Layers
	live     *Config
	synonyms bool
	docs     bool
	want     []string // nil: every key
}

func (d *describer) wanted(name string) bool { return d.want == nil || slices.Contains(d.want, name) }

// entry makes one config entry.
func (d *describer) entry(scope catalogue.Scope, name string, value *string, src kmsg.ConfigSource, readOnly bool, doc string) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value, c.Source, c.ReadOnly = name, value, src, readOnly
	c.IsDefault = src == kmsg.ConfigSourceDefaultConfig
	k, _ := catalogue.Lookup(scope, name)
	c.ConfigType = configType(k.Type)
	if Sensitive(scope, name) {
		c.IsSensitive, c.Value = true, nil
	}
	if d.docs && doc != "" {
		c.Documentation = &doc
	}
	return c
}

// maskSynonyms hides the synonyms' values of a sensitive key.
func maskSynonyms(sensitive bool, syns []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	if sensitive {
		for i := range syns {
			syns[i].Value = nil
		}
	}
	return syns
}

// brokerSynonyms are the sources of key and its synonyms below layer top,
// highest first, ending with the key's default.
func (d *describer) brokerSynonyms(key string, top Layer) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	for l := top; l > LayerDefault; l-- {
		for _, s := range Synonyms(key) {
			if v, ok := d.ls[l][s]; ok {
				out = append(out, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: s, Value: &v, Source: l.Source()})
			}
		}
	}
	if k, ok := LookupKey(key); ok && k.Def != "" {
		v := k.Def
		out = append(out, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: key, Value: &v, Source: kmsg.ConfigSourceDefaultConfig})
	}
	return out
}

// broker is every key of this node.
func (d *describer) broker() []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range Keys() {
		if !d.wanted(k.Name) {
			continue
		}
		v, layer, ok := d.ls.Lookup(k.Name)
		var value *string
		switch {
		case ok:
			value = &v
		case k.Def != "":
			def := k.Def
			value = &def
		}
		c := d.entry(catalogue.Broker, k.Name, value, layer.Source(), !k.Dynamic, k.Doc)
		if d.synonyms {
			c.ConfigSynonyms = maskSynonyms(c.IsSensitive, d.brokerSynonyms(k.Name, LayerBroker))
		}
		out = append(out, c)
	}
	// Kafka's dynamic keys stored for this node that Fjord does not act on
	// (kafkaDynamicIgnored).
	stored := map[string]bool{}
	for _, l := range []Layer{LayerBroker, LayerClusterDefault} {
		for k := range d.ls[l] {
			if _, ok := LookupKey(k); !ok && d.wanted(k) {
				stored[k] = true
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(stored)) {
		v, layer, _ := d.ls.Lookup(name)
		c := d.entry(catalogue.Broker, name, &v, layer.Source(), false, "")
		if d.synonyms {
			c.ConfigSynonyms = maskSynonyms(c.IsSensitive, d.brokerSynonyms(name, LayerBroker))
		}
		out = append(out, c)
	}
	return out
}

// clusterDefaults is the cluster-wide dynamic broker configs.
func (d *describer) clusterDefaults() []kmsg.DescribeConfigsResponseResourceConfig {
	m := d.ls[LayerClusterDefault]
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if !d.wanted(name) {
			continue
		}
		v := m[name]
		k, _ := LookupKey(name)
		c := d.entry(catalogue.Broker, name, &v, kmsg.ConfigSourceDynamicDefaultBrokerConfig, false, k.Doc)
		if d.synonyms {
			c.ConfigSynonyms = maskSynonyms(c.IsSensitive, d.brokerSynonyms(name, LayerClusterDefault))
		}
		out = append(out, c)
	}
	return out
}

// topic is every config of a topic with the given overrides.
func (d *describer) topic(overrides map[string]string) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, td := range TopicKeys() {
		if !d.wanted(td.Name) {
			continue
		}
		v, override := td.Effective(d.live, overrides)
		src := kmsg.ConfigSourceDynamicTopicConfig
		if !override {
			src = kmsg.ConfigSourceDefaultConfig
			// The source of the broker key the default comes from: the
			// highest-priority synonym any layer holds.
			for _, s := range Synonyms(td.BrokerKey) {
				if _, l, ok := d.ls.Lookup(s); ok && td.BrokerKey != "" {
					src = l.Source()
					break
				}
			}
		}
		doc := ""
		if k, ok := LookupKey(td.BrokerKey); ok {
			doc = k.Doc
		}
		c := d.entry(catalogue.Topic, td.Name, &v, src, false, doc)
		if d.synonyms {
			if override {
				ov := v
				c.ConfigSynonyms = append(c.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: td.Name, Value: &ov, Source: kmsg.ConfigSourceDynamicTopicConfig})
			}
			if td.BrokerKey != "" {
				c.ConfigSynonyms = append(c.ConfigSynonyms, d.brokerSynonyms(td.BrokerKey, LayerBroker)...)
			}
		}
		out = append(out, c)
	}
	// Kafka keys stored with the topic that Fjord does not act on.
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		if FindTopicKey(name) != nil || !d.wanted(name) {
			continue
		}
		v := overrides[name]
		c := d.entry(catalogue.Topic, name, &v, kmsg.ConfigSourceDynamicTopicConfig, false, "")
		if d.synonyms {
			c.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{{Name: name, Value: &v, Source: kmsg.ConfigSourceDynamicTopicConfig}}
		}
		out = append(out, c)
	}
	return out
}

// group is every config of a group with the given overrides.
func (d *describer) group(overrides map[string]string) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	entry := func(name, typ string, value *string, src kmsg.ConfigSource, doc string) kmsg.DescribeConfigsResponseResourceConfig {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.Source, c.ConfigType = name, value, src, configType(typ)
		c.IsDefault = src == kmsg.ConfigSourceDefaultConfig
		if d.docs && doc != "" {
			c.Documentation = &doc
		}
		return c
	}
	for _, k := range groupKeys {
		if k.Refused != "" || !d.wanted(k.Name) {
			continue
		}
		if v, ok := overrides[k.Name]; ok {
			v = strings.TrimSpace(v)
			c := entry(k.Name, k.Type, &v, kmsg.ConfigSourceGroupConfig, k.Doc)
			if d.synonyms {
				c.ConfigSynonyms = append([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{{Name: k.Name, Value: &v, Source: kmsg.ConfigSourceGroupConfig}},
					d.groupDefaultSynonyms(&k)...)
			}
			out = append(out, c)
			continue
		}
		// The default: the broker key's value, from its highest layer.
		v := k.Default(d.live)
		src := kmsg.ConfigSourceDefaultConfig
		if k.BrokerKey != "" {
			if _, l, ok := d.ls.Lookup(k.BrokerKey); ok {
				src = l.Source()
			}
		}
		c := entry(k.Name, k.Type, &v, src, k.Doc)
		if d.synonyms {
			c.ConfigSynonyms = d.groupDefaultSynonyms(&k)
		}
		out = append(out, c)
	}
	// Other keys stored with the group (from a newer Fjord, say).
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		if k := FindGroupKey(name); (k != nil && k.Refused == "") || !d.wanted(name) {
			continue
		}
		v := overrides[name]
		c := entry(name, "", &v, kmsg.ConfigSourceGroupConfig, "")
		if d.synonyms {
			c.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{{Name: name, Value: &v, Source: kmsg.ConfigSourceGroupConfig}}
		}
		out = append(out, c)
	}
	return out
}

// groupDefaultSynonyms are the sources of a group key's default, highest
// first: its broker key's layers ending with that key's default, or the
// group key's own fixed default.
func (d *describer) groupDefaultSynonyms(k *GroupKey) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	if k.BrokerKey != "" {
		return d.brokerSynonyms(k.BrokerKey, LayerBroker)
	}
	def := k.Def
	return []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{{Name: k.Name, Value: &def, Source: kmsg.ConfigSourceDefaultConfig}}
}

// configType maps Kafka's ConfigDef type names to the protocol's enum.
func configType(t string) kmsg.ConfigType {
	switch t {
	case "boolean":
		return kmsg.ConfigTypeBoolean
	case "string":
		return kmsg.ConfigTypeString
	case "int":
		return kmsg.ConfigTypeInt
	case "short":
		return kmsg.ConfigTypeShort
	case "long":
		return kmsg.ConfigTypeLong
	case "double":
		return kmsg.ConfigTypeDouble
	case "list":
		return kmsg.ConfigTypeList
	case "class":
		return kmsg.ConfigTypeClass
	case "password":
		return kmsg.ConfigTypePassword
	}
	return kmsg.ConfigTypeUnknown
}

func checkDescribeConfigs(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	keep, denied := api.Sift(req.Resources, func(r kmsg.DescribeConfigsRequestResource) (kmsg.DescribeConfigsResponseResource, bool) {
		ok, code := configResourceAllowed(z, acl.OpDescribeConfigs, r.ResourceType, r.ResourceName)
		d := kmsg.NewDescribeConfigsResponseResource()
		d.ResourceType, d.ResourceName, d.ErrorCode = r.ResourceType, r.ResourceName, code
		return d, ok
	})
	if len(denied) > 0 {
		req.Resources = keep
	}
	// Never answered without the handler: DescribeConfigs of nothing is
	// still a DescribeConfigs (the handler answers the empty list).
	return nil, api.Amend(len(denied), func(resp *kmsg.DescribeConfigsResponse) { resp.Resources = append(resp.Resources, denied...) })
}
