package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The active controller's decision on AlterConfigs and
// IncrementalAlterConfigs: per resource, the SetConfig records that turn
// its stored configs into the requested ones, or a Kafka error code. What a
// key means (whether it exists, its type, whether it may change at run
// time) is the broker's knowledge, passed in as a ConfigPolicy; this file
// knows only the operations and the resources.

// ConfigOp is an IncrementalAlterConfigs operation, with Kafka's values.
type ConfigOp int8

const (
	OpSet      ConfigOp = 0
	OpDelete   ConfigOp = 1
	OpAppend   ConfigOp = 2
	OpSubtract ConfigOp = 3
)

// ConfigAlteration is one operation on one key. Value is ignored for
// OpDelete; OpSet, OpAppend and OpSubtract need it.
type ConfigAlteration struct {
	Key   string
	Op    ConfigOp
	Value *string
}

// ConfigChange is the requested alteration of one resource.
type ConfigChange struct {
	Resource ConfigResource
	Ops      []ConfigAlteration
	// Replace is the legacy AlterConfigs: the resource's stored configs
	// become exactly the OpSet keys; every other stored key is deleted.
	Replace bool
}

// ConfigPolicy is what the decision needs to know about keys.
type ConfigPolicy struct {
	// Check judges one key's new value for a resource. A non-nil error
	// (ConfigError) wraps the *kerr.Error to answer (INVALID_CONFIG for an unknown key,
	// a bad value or a read-only key; POLICY_VIOLATION for a value that
	// is valid in Kafka but that Fjord refuses as unsafe); an error that
	// wraps none is answered INVALID_CONFIG.
	Check func(res ConfigResource, key, value string) error
	// List reports whether a key's type is a comma separated list (only
	// those take APPEND and SUBTRACT), and its default value, which an
	// APPEND or SUBTRACT starts from when the resource has no value.
	List func(res ConfigResource, key string) (isList bool, def string)
	// CheckResource, if not nil, judges a resource's configs as a whole
	// once they change: old is what the resource stores now and configs
	// every key it would store (both read-only; either may be nil). It is
	// for rules between keys, which Check cannot see (a group's session
	// timeout must exceed its heartbeat interval), and between a value and
	// the one it replaces (a tiered topic's remote.storage.enable cannot be
	// turned off); its errors are answered as Check's are.
	CheckResource func(res ConfigResource, old, configs map[string]string) error
}

// ConfigResult is the decision for one ConfigChange: the records to
// propose (none when nothing changes), or ErrorCode and Message.
type ConfigResult struct {
	Resource  ConfigResource
	Records   []Record
	ErrorCode int16
	Message   string
}

// AlterConfigs decides the changes, one result per change in order. A
// resource named twice in one request is refused both times, as Kafka does.
// Each result's records apply to img independently of the others' (they
// touch different resources).
func AlterConfigs(img *Image, changes []ConfigChange, policy ConfigPolicy) []ConfigResult {
	seen := map[ConfigResource]int{}
	for _, c := range changes {
		seen[c.Resource]++
	}
	out := make([]ConfigResult, len(changes))
	for i, c := range changes {
		r := &out[i]
		r.Resource = c.Resource
		if policy.Check == nil || policy.List == nil {
			r.ErrorCode, r.Message = kerr.InvalidRequest.Code, "this controller has no config policy"
			continue
		}
		if seen[c.Resource] > 1 {
			r.ErrorCode, r.Message = kerr.InvalidRequest.Code, "the resource is named more than once in the request"
			continue
		}
		cur, err := storedConfigs(img, c.Resource)
		if err == nil {
			r.Records, err = alterResource(c, cur, policy)
		}
		if err != nil {
			r.Records = nil
			r.ErrorCode, r.Message = errorCode(err), err.Error()
		}
	}
	return out
}

// storedConfigs is the resource's stored configs (shared: read only).
func storedConfigs(img *Image, res ConfigResource) (map[string]string, error) {
	switch res.Type {
	case ResourceTopic:
		if msg := InvalidTopicName(res.Name); msg != "" {
			return nil, ConfigError(kerr.InvalidTopicException, "%s", msg)
		}
		t := img.Topic(res.Name)
		if t == nil {
			return nil, ConfigError(kerr.UnknownTopicOrPartition, "topic %q does not exist", res.Name)
		}
		return t.Configs, nil
	case ResourceBroker:
		if res.Name != "" {
			if id, err := strconv.ParseInt(res.Name, 10, 32); err != nil || id < 0 || strconv.Itoa(int(id)) != res.Name {
				return nil, ConfigError(kerr.InvalidRequest, "broker %q is not a broker id (or \"\" for the cluster default)", res.Name)
			}
		}
		return img.brokerConfigs[res.Name], nil
	case ResourceGroup:
		// Any id but "" names a group, existing or not: configs may be
		// set before a group's first member joins.
		if res.Name == "" {
			return nil, ConfigError(kerr.InvalidRequest, "a group config resource needs a group id")
		}
		return img.groupConfigs[res.Name], nil
	}
	return nil, ConfigError(kerr.InvalidRequest, "resource type %d has no configs in the metadata log", res.Type)
}

// alterResource computes the records of one change against the stored configs.
func alterResource(c ConfigChange, cur map[string]string, policy ConfigPolicy) ([]Record, error) {
	keys := map[string]bool{}
	for _, op := range c.Ops {
		if op.Key == "" {
			return nil, ConfigError(kerr.InvalidRequest, "empty config name")
		}
		if keys[op.Key] {
			return nil, ConfigError(kerr.InvalidRequest, "config %q is named more than once", op.Key)
		}
		keys[op.Key] = true
	}
	next := maps.Clone(cur)
	if next == nil {
		next = map[string]string{}
	}
	if c.Replace {
		next = map[string]string{}
	}
	for _, op := range c.Ops {
		switch op.Op {
		case OpSet:
			if op.Value == nil {
				return nil, ConfigError(kerr.InvalidRequest, "%s: SET needs a value", op.Key)
			}
			next[op.Key] = *op.Value
		case OpDelete:
			delete(next, op.Key)
		case OpAppend, OpSubtract:
			isList, def := policy.List(c.Resource, op.Key)
			if !isList {
				return nil, ConfigError(kerr.InvalidConfig, "%s: APPEND and SUBTRACT apply to list configs only", op.Key)
			}
			if op.Value == nil {
				return nil, ConfigError(kerr.InvalidRequest, "%s: APPEND and SUBTRACT need a value", op.Key)
			}
			old, ok := cur[op.Key]
			if !ok {
				old = def
			}
			items := splitList(old)
			for _, v := range splitList(*op.Value) {
				if op.Op == OpAppend && !slices.Contains(items, v) {
					items = append(items, v)
				} else if op.Op == OpSubtract {
					items = slices.DeleteFunc(items, func(s string) bool { return s == v })
				}
			}
			next[op.Key] = strings.Join(items, ",")
		default:
			return nil, ConfigError(kerr.InvalidRequest, "%s: unknown operation %d", op.Key, op.Op)
		}
	}
	var recs []Record
	for _, k := range slices.Sorted(maps.Keys(next)) {
		v := next[k]
		if old, ok := cur[k]; ok && old == v {
			continue
		}
		if err := policy.Check(c.Resource, k, v); err != nil {
			return nil, err
		}
		recs = append(recs, NewRecord(SetConfig{Resource: c.Resource, Key: k, Value: &v}))
	}
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		if _, ok := next[k]; !ok {
			recs = append(recs, NewRecord(SetConfig{Resource: c.Resource, Key: k}))
		}
	}
	if len(recs) > 0 && policy.CheckResource != nil {
		if err := policy.CheckResource(c.Resource, cur, next); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// splitList splits a comma separated list, dropping empty items.
func splitList(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// configError is a refusal with the Kafka error to answer.
type configError struct {
	code *kerr.Error
	msg  string
}

func (e *configError) Error() string { return e.msg }
func (e *configError) Unwrap() error { return e.code }

// ConfigError makes an error that answers code with the message.
func ConfigError(code *kerr.Error, format string, args ...any) error {
	return &configError{code, fmt.Sprintf(format, args...)}
}

// errorCode is the Kafka code an error wraps, INVALID_CONFIG if none.
func errorCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.InvalidConfig.Code
}

// IncrementalChanges is an IncrementalAlterConfigs request's changes, one
// per resource in order.
func IncrementalChanges(req *kmsg.IncrementalAlterConfigsRequest) []ConfigChange {
	changes := make([]ConfigChange, len(req.Resources))
	for i, rr := range req.Resources {
		ch := ConfigChange{Resource: ConfigResource{Type: ResourceType(rr.ResourceType), Name: rr.ResourceName}}
		for _, cf := range rr.Configs {
			ch.Ops = append(ch.Ops, ConfigAlteration{Key: cf.Name, Op: ConfigOp(cf.Op), Value: cf.Value})
		}
		changes[i] = ch
	}
	return changes
}

// LegacyChanges is an AlterConfigs request's changes: each replaces its
// resource's whole set.
func LegacyChanges(req *kmsg.AlterConfigsRequest) []ConfigChange {
	changes := make([]ConfigChange, len(req.Resources))
	for i, rr := range req.Resources {
		ch := ConfigChange{Resource: ConfigResource{Type: ResourceType(rr.ResourceType), Name: rr.ResourceName}, Replace: true}
		for _, cf := range rr.Configs {
			ch.Ops = append(ch.Ops, ConfigAlteration{Key: cf.Name, Op: OpSet, Value: cf.Value})
		}
		changes[i] = ch
	}
	return changes
}

// DecideIncrementalAlterConfigs decides an IncrementalAlterConfigs
// (AlterConfigs) in one round: every accepted resource's records in one
// batch, so a request's accepted changes land together; none if the
// request only validates.
func DecideIncrementalAlterConfigs(req *kmsg.IncrementalAlterConfigsRequest, policy ConfigPolicy) Decision {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	return decideConfigs(IncrementalChanges(req), req.ValidateOnly, policy, resp, func(a kmsg.AlterConfigsResponseResource) {
		resp.Resources = append(resp.Resources, kmsg.IncrementalAlterConfigsResponseResource(a))
	})
}

// DecideAlterConfigs decides a (legacy) AlterConfigs as
// DecideIncrementalAlterConfigs does, each resource's configs replaced
// whole.
func DecideAlterConfigs(req *kmsg.AlterConfigsRequest, policy ConfigPolicy) Decision {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	return decideConfigs(LegacyChanges(req), req.ValidateOnly, policy, resp, func(a kmsg.AlterConfigsResponseResource) {
		resp.Resources = append(resp.Resources, a)
	})
}

// decideConfigs is both config decisions: add adds one resource's answer,
// in the order of changes, to resp. The answer is built as an AlterConfigs
// resource, which IncrementalAlterConfigs' converts from: kmsg gives the
// two the same fields but no common interface.
func decideConfigs(changes []ConfigChange, validateOnly bool, policy ConfigPolicy,
	resp kmsg.Response, add func(kmsg.AlterConfigsResponseResource)) Decision {
	answer := func(i int, code int16, msg *string) {
		a := kmsg.NewAlterConfigsResponseResource()
		a.ResourceType, a.ResourceName = kmsg.ConfigResourceType(changes[i].Resource.Type), changes[i].Resource.Name
		a.ErrorCode, a.ErrorMessage = code, msg
		add(a)
	}
	var results []ConfigResult
	return oneRound(func(img *Image) []Record {
		results = AlterConfigs(img, changes, policy)
		return recordsOf(results, !validateOnly, func(r ConfigResult) []Record { return r.Records })
	}, func(_ *Image, code int16) (kmsg.Response, []Note) {
		var notes []Note
		for i, r := range results {
			switch {
			case r.ErrorCode != 0:
				answer(i, r.ErrorCode, kmsg.StringPtr(r.Message))
			case len(r.Records) > 0 && !validateOnly:
				answer(i, code, nil)
				if code == 0 {
					notes = append(notes, info("altered configs", "resource_type", int8(r.Resource.Type), "resource", r.Resource.Name, "keys", len(r.Records)))
				}
			default:
				answer(i, 0, nil)
			}
		}
		return resp, notes
	})
}
