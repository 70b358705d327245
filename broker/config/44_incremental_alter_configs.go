package config

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/tlsconf"
	"github.com/fjordlog/fjord/controller"
)

// IncrementalAlterConfigs: v0-1
//
// Behaviour:
//   - Topic and broker resources (a broker id, or "" for the cluster-wide
//     default) are forwarded to the active controller, which checks every
//     key (dynamic.go's policy) and commits the accepted resources'
//     changes to the metadata log in one batch. SET, DELETE, APPEND and
//     SUBTRACT as KIP-339 (APPEND/SUBTRACT only on list keys; they start
//     from the default when the key has no value). A resource is accepted
//     or refused whole: INVALID_CONFIG (unknown key, bad value, read-only
//     key), POLICY_VIOLATION (a Kafka value Fjord refuses as unsafe),
//     UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (a resource or a key
//     named twice, a broker name that is not an id).
//   - Group resources (type 32, a group id; KIP-848, KIP-932) likewise:
//     SET and DELETE of the group configs in groups.go (APPEND and
//     SUBTRACT are INVALID_CONFIG: none is a list), each value checked
//     against its type, Kafka's fixed range and the active controller's
//     group.* bounds, and the session timeout against the heartbeat
//     interval (INVALID_CONFIG, naming the key and the bound). An unknown
//     key is INVALID_CONFIG, as in Kafka; so are the streams.* keys,
//     since Fjord serves no streams groups. The group need not exist.
//   - The answer waits (at most 5 s) until this broker's image shows the
//     accepted changes, so a DescribeConfigs sent here next sees them.
//   - BROKER_LOGGER resources are answered by the broker they name, and
//     not stored: a logger level lasts until the process restarts, as in
//     Kafka. Fjord has one logger, "root".
//   - validateOnly checks everything and changes nothing.
//   - Password configs (ssl.*.password, the inline PEM stores; Kafka's
//     PASSWORD type) are encrypted here with password.encoder.secret
//     before the request is forwarded, so the controllers and the
//     metadata log hold only ciphertext; without a secret the resource is
//     refused with INVALID_REQUEST, naming the key (passwords.go).
//   - Any operation on super.users (cluster default or a broker resource)
//     needs a super user besides ALTER_CONFIGS on the cluster: otherwise
//     CLUSTER_AUTHORIZATION_FAILED for that resource, with a message
//     saying so, audited as a denial (api.go, superUsersChangeAllowed).
//
// Version notes:
//   - v1: flexible
func incrementalAlterConfigsEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 44, Client: api.Versions(0, 1), Handle: bindTo(h, handleIncrementalAlterConfigs),
		Controller:    api.Versions(0, 1),
		Rule:          api.Needs("ALTER_CONFIGS on TOPIC, on GROUP for group configs, or on CLUSTER for broker configs; any change to super.users also needs a super user", 4, checkIncrementalAlterConfigs),
		Mutates:       true,
		ErrorResponse: errorIncrementalAlterConfigs,
	}
}

func handleIncrementalAlterConfigs(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	fwd := *req
	fwd.Resources = nil
	refused := map[int]kmsg.IncrementalAlterConfigsResponseResource{} // by index in req.Resources
	for i, rr := range req.Resources {
		sealed, err := SealIncremental(h.Passwords(), rr)
		if err != nil {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			sr.ErrorCode, sr.ErrorMessage = SealRefusal(err)
			refused[i] = sr
			continue
		}
		if err := checkOwnSSL(h, rr); err != nil {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			sr.ErrorCode, sr.ErrorMessage = kerr.InvalidConfig.Code, kmsg.StringPtr(err.Error())
			refused[i] = sr
			continue
		}
		if rr.ResourceType != kmsg.ConfigResourceTypeBrokerLogger {
			fwd.Resources = append(fwd.Resources, sealed)
		}
	}
	api.Forward(h, cc, &fwd, api.Forwarding[*kmsg.IncrementalAlterConfigsResponse]{WaitMax: configWait,
		Prepare: func() bool { return len(fwd.Resources) > 0 },
		Finish: func(_ context.Context, fresp *kmsg.IncrementalAlterConfigsResponse, _ error) kmsg.Response {
			next := 0
			for i, rr := range req.Resources {
				if sr, ok := refused[i]; ok {
					resp.Resources = append(resp.Resources, sr)
					continue
				}
				if rr.ResourceType == kmsg.ConfigResourceTypeBrokerLogger {
					sr := kmsg.NewIncrementalAlterConfigsResponseResource()
					sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
					ops := make([]loggerOp, len(rr.Configs))
					for i, c := range rr.Configs {
						ops[i] = loggerOp{c.Name, controller.ConfigOp(c.Op), c.Value}
					}
					sr.ErrorCode, sr.ErrorMessage = alterLoggers(h, rr.ResourceName, ops, req.ValidateOnly)
					resp.Resources = append(resp.Resources, sr)
					continue
				}
				var sr kmsg.IncrementalAlterConfigsResponseResource
				if next < len(fresp.Resources) {
					sr = fresp.Resources[next]
				} else {
					sr = kmsg.NewIncrementalAlterConfigsResponseResource()
					sr.ResourceType, sr.ResourceName, sr.ErrorCode = rr.ResourceType, rr.ResourceName, kerr.UnknownServerError.Code
				}
				next++
				resp.Resources = append(resp.Resources, sr)
			}
			return resp
		}}, respond)
}

// configWait bounds the wait for this broker's image of AlterConfigs and
// IncrementalAlterConfigs (forwarding.waitMax), which have no timeout of
// their own: the bound they always had.
const configWait = 5 * time.Second

// checkOwnSSL checks a change of this node's own TLS settings before it is
// forwarded: the new stores must load here, for every TLS listener the
// change touches (tlsconf.Listeners.CheckDynamic), so a wrong path or
// password is INVALID_CONFIG rather than a certificate that never
// changes. rr is the request's, passwords in clear; the stored ones are
// decrypted to check them with it.
func checkOwnSSL(h APIHost, rr kmsg.IncrementalAlterConfigsRequestResource) error {
	if rr.ResourceType != kmsg.ConfigResourceTypeBroker || rr.ResourceName != strconv.Itoa(int(h.Static().NodeID)) ||
		!slices.ContainsFunc(rr.Configs, func(c kmsg.IncrementalAlterConfigsRequestResourceConfig) bool { return tlsconf.IsKey(c.Name) }) {
		return nil
	}
	after, err := OpenPasswords(h.Passwords(), h.Image().BrokerConfigs()[rr.ResourceName])
	if err != nil {
		return err
	}
	for _, c := range rr.Configs {
		switch controller.ConfigOp(c.Op) {
		case controller.OpSet:
			if c.Value != nil {
				after[c.Name] = *c.Value
			}
		case controller.OpDelete:
			delete(after, c.Name)
		}
	}
	if err := h.TLS().CheckDynamic(after); err != nil {
		return controller.ConfigError(kerr.InvalidConfig, "%v", err)
	}
	return nil
}

func checkIncrementalAlterConfigs(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	keep, denied := api.Sift(req.Resources, func(r kmsg.IncrementalAlterConfigsRequestResource) (kmsg.IncrementalAlterConfigsResponseResource, bool) {
		ok, code := configResourceAllowed(z, acl.OpAlterConfigs, r.ResourceType, r.ResourceName)
		var msg *string
		if ok && !superUsersChangeAllowed(z, r.ResourceType, namesSuperUsers(r)) {
			ok, code, msg = false, api.ClusterDenied, kmsg.StringPtr(SuperUsersDenied)
		}
		d := kmsg.NewIncrementalAlterConfigsResponseResource()
		d.ResourceType, d.ResourceName, d.ErrorCode, d.ErrorMessage = r.ResourceType, r.ResourceName, code, msg
		return d, ok
	})
	if len(denied) > 0 {
		req.Resources = keep
	}
	return api.Partial(req, len(denied), len(keep), func(resp *kmsg.IncrementalAlterConfigsResponse) { resp.Resources = append(resp.Resources, denied...) })
}

// namesSuperUsers reports whether r alters super.users: any operation
// on it (SET, DELETE, APPEND, SUBTRACT) counts, since taking a super user
// away is as much a change of who may do what as adding one.
func namesSuperUsers(r kmsg.IncrementalAlterConfigsRequestResource) bool {
	for _, c := range r.Configs {
		if c.Name == superUsersKey {
			return true
		}
	}
	return false
}

func errorIncrementalAlterConfigs(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	r := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName, sr.ErrorCode = rr.ResourceType, rr.ResourceName, code
		r.Resources = append(r.Resources, sr)
	}
	return r
}
