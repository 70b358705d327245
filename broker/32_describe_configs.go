package broker

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs: v0-4
//
// Behaviour:
//   - Topics (resource type 2): every supported topic config with its
//     effective value; overrides have source DYNAMIC_TOPIC_CONFIG, the rest
//     DEFAULT_CONFIG with the broker property as a synonym when asked.
//   - Brokers (resource type 4, name "" or this node's id): the node's
//     settings, read-only (no dynamic broker configs yet).
//   - ConfigNames restricts the answer; unknown resource types get
//     INVALID_REQUEST.
//
// Version notes:
//   - v1: synonyms, source; v3: documentation, config type; v4: flexible
func init() { regKey(32, 0, 4, handleDescribeConfigs) }

func handleDescribeConfigs(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		want := func(name string) bool {
			if rr.ConfigNames == nil {
				return true
			}
			for _, n := range rr.ConfigNames {
				if n == name {
					return true
				}
			}
			return false
		}
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := b.lookup(rr.ResourceName)
			if t == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			for i := range topicConfigDefs {
				d := &topicConfigDefs[i]
				if !want(d.name) {
					continue
				}
				v, override := effectiveValue(&b.cfg, t.meta.Configs, d)
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value = d.name, &v
				c.Source = kmsg.ConfigSourceDefaultConfig
				if override {
					c.Source = kmsg.ConfigSourceDynamicTopicConfig
				}
				c.IsDefault = !override
				if req.IncludeSynonyms && d.brokerKey != "" {
					def := d.def(&b.cfg)
					c.ConfigSynonyms = append(c.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
						Name: d.brokerKey, Value: &def, Source: kmsg.ConfigSourceStaticBrokerConfig,
					})
				}
				sr.Configs = append(sr.Configs, c)
			}
		case kmsg.ConfigResourceTypeBroker:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(b.cfg.NodeID)) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				break
			}
			for _, kv := range b.cfg.brokerConfigs() {
				if !want(kv[0]) {
					continue
				}
				v := kv[1]
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value = kv[0], &v
				c.ReadOnly = true
				c.Source = kmsg.ConfigSourceStaticBrokerConfig
				sr.Configs = append(sr.Configs, c)
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
		}
		resp.Resources = append(resp.Resources, sr)
	}
	respond(resp)
}
