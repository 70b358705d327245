package broker

import (
	"github.com/fjordlog/fjord/controller/active"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs: v0-2
//
// Behaviour:
//   - The legacy call: each resource's stored configs become exactly the
//     ones given (every other stored key is deleted). Otherwise as
//     IncrementalAlterConfigs (forwarded to the active controller, the
//     same checks and error codes, validateOnly, the answer once this
//     broker's image shows the change).
//   - BROKER_LOGGER is refused with INVALID_REQUEST, as Kafka does: loggers
//     are altered with IncrementalAlterConfigs.
//
// Version notes:
//   - v1: same as v0; v2: flexible
func init() { regKey(33, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	fwd := *req
	fwd.Resources = nil
	for _, rr := range req.Resources {
		if rr.ResourceType != kmsg.ConfigResourceTypeBrokerLogger {
			fwd.Resources = append(fwd.Resources, rr)
		}
	}
	b.goLoop(func() {
		ctx, cancel := adminCtx(cc.ctx, 0)
		defer cancel()
		var fresp *kmsg.AlterConfigsResponse
		if len(fwd.Resources) > 0 {
			fresp = b.forwardConfigs(ctx, &fwd, active.LegacyChanges(&fwd), req.ValidateOnly).(*kmsg.AlterConfigsResponse)
		}
		next := 0
		for _, rr := range req.Resources {
			var sr kmsg.AlterConfigsResponseResource
			switch {
			case rr.ResourceType == kmsg.ConfigResourceTypeBrokerLogger:
				sr = kmsg.NewAlterConfigsResponseResource()
				sr.ResourceType, sr.ResourceName, sr.ErrorCode = rr.ResourceType, rr.ResourceName, kerr.InvalidRequest.Code
				m := "AlterConfigs does not alter BROKER_LOGGER resources: use IncrementalAlterConfigs"
				sr.ErrorMessage = &m
			case fresp != nil && next < len(fresp.Resources):
				sr = fresp.Resources[next]
				next++
			default:
				sr = kmsg.NewAlterConfigsResponseResource()
				sr.ResourceType, sr.ResourceName, sr.ErrorCode = rr.ResourceType, rr.ResourceName, kerr.UnknownServerError.Code
				next++
			}
			resp.Resources = append(resp.Resources, sr)
		}
		respond(resp)
	})
}
