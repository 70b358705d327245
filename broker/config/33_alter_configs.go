package config

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/controller"
)

// AlterConfigs: v0-2
//
// Behaviour:
//   - The legacy call: each resource's stored configs become exactly the
//     ones given (every other stored key is deleted). Otherwise as
//     IncrementalAlterConfigs (forwarded to the active controller, the
//     same checks and error codes, validateOnly, the answer once this
//     broker's image shows the change).
//   - Password configs are encrypted before the request is forwarded, and
//     refused without password.encoder.secret, as in
//     IncrementalAlterConfigs. Since the call replaces the whole set and
//     DescribeConfigs never shows a password, a stored password not given
//     again is deleted, as in Kafka.
//   - Group resources (type 32) as in IncrementalAlterConfigs: the
//     group's overrides become exactly the ones given.
//   - BROKER_LOGGER is refused with INVALID_REQUEST, as Kafka does: loggers
//     are altered with IncrementalAlterConfigs.
//   - A change to super.users on a broker resource needs a super user, as
//     in IncrementalAlterConfigs. Since the call replaces the whole set,
//     leaving out a stored super.users deletes it, which counts as a
//     change; giving the stored value again does not.
//
// Version notes:
//   - v1: same as v0; v2: flexible
func alterConfigsEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 33, Client: api.Versions(0, 2), Handle: bindTo(h, handleAlterConfigs),
		Controller:    api.Versions(0, 2),
		Rule:          api.Needs("ALTER_CONFIGS on TOPIC, on GROUP for group configs, or on CLUSTER for broker configs; a change to super.users (naming it, or replacing a stored value) also needs a super user", 4, checkWith(h, checkAlterConfigs)),
		Mutates:       true,
		ErrorResponse: errorAlterConfigs,
	}
}

func handleAlterConfigs(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	fwd := *req
	fwd.Resources = nil
	refused := map[int]kmsg.AlterConfigsResponseResource{} // by index in req.Resources
	for i, rr := range req.Resources {
		if rr.ResourceType == kmsg.ConfigResourceTypeBrokerLogger {
			continue
		}
		sealed, err := SealLegacy(h.Passwords(), rr)
		if err != nil {
			sr := kmsg.NewAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			sr.ErrorCode, sr.ErrorMessage = SealRefusal(err)
			refused[i] = sr
			continue
		}
		fwd.Resources = append(fwd.Resources, sealed)
	}
	api.Forward(h, cc, &fwd, api.Forwarding[*kmsg.AlterConfigsResponse]{WaitMax: configWait,
		Prepare: func() bool { return len(fwd.Resources) > 0 },
		Finish: func(_ context.Context, fresp *kmsg.AlterConfigsResponse, _ error) kmsg.Response {
			next := 0
			for i, rr := range req.Resources {
				var sr kmsg.AlterConfigsResponseResource
				refusal, isRefused := refused[i]
				switch {
				case isRefused:
					sr = refusal
				case rr.ResourceType == kmsg.ConfigResourceTypeBrokerLogger:
					sr = kmsg.NewAlterConfigsResponseResource()
					sr.ResourceType, sr.ResourceName, sr.ErrorCode = rr.ResourceType, rr.ResourceName, kerr.InvalidRequest.Code
					m := "AlterConfigs does not alter BROKER_LOGGER resources: use IncrementalAlterConfigs"
					sr.ErrorMessage = &m
				case next < len(fresp.Resources):
					sr = fresp.Resources[next]
					next++
				default:
					sr = kmsg.NewAlterConfigsResponseResource()
					sr.ResourceType, sr.ResourceName, sr.ErrorCode = rr.ResourceType, rr.ResourceName, kerr.UnknownServerError.Code
					next++
				}
				resp.Resources = append(resp.Resources, sr)
			}
			return resp
		}}, respond)
}

func checkAlterConfigs(h APIHost, z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	var img *controller.Image
	keep, denied := api.Sift(req.Resources, func(r kmsg.AlterConfigsRequestResource) (kmsg.AlterConfigsResponseResource, bool) {
		ok, code := configResourceAllowed(z, acl.OpAlterConfigs, r.ResourceType, r.ResourceName)
		var msg *string
		if ok && r.ResourceType == kmsg.ConfigResourceTypeBroker {
			if img == nil {
				if img = h.Image(); img == nil {
					img = &controller.Image{}
				}
			}
			if !superUsersChangeAllowed(z, r.ResourceType, replacesSuperUsers(img, r)) {
				ok, code, msg = false, api.ClusterDenied, kmsg.StringPtr(SuperUsersDenied)
			}
		}
		d := kmsg.NewAlterConfigsResponseResource()
		d.ResourceType, d.ResourceName, d.ErrorCode, d.ErrorMessage = r.ResourceType, r.ResourceName, code, msg
		return d, ok
	})
	if len(denied) > 0 {
		req.Resources = keep
	}
	return api.Partial(req, len(denied), len(keep), func(resp *kmsg.AlterConfigsResponse) { resp.Resources = append(resp.Resources, denied...) })
}

// replacesSuperUsers reports whether the legacy AlterConfigs of broker
// resource r changes super.users as img stores it. The call replaces the
// resource's whole set, so leaving out a stored value deletes it; naming
// the key counts as a change unless every mention gives the stored value
// again.
func replacesSuperUsers(img *controller.Image, r kmsg.AlterConfigsRequestResource) bool {
	stored, had := img.Config(controller.ConfigResource{Type: controller.ResourceBroker, Name: r.ResourceName}, superUsersKey)
	named := false
	for _, c := range r.Configs {
		if c.Name != superUsersKey {
			continue
		}
		named = true
		if !had || c.Value == nil || *c.Value != stored {
			return true
		}
	}
	return had && !named
}

func errorAlterConfigs(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.AlterConfigsRequest)
	r := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName, sr.ErrorCode = rr.ResourceType, rr.ResourceName, code
		r.Resources = append(r.Resources, sr)
	}
	return r
}
