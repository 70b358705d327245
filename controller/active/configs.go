package active

import (
	"context"

	"github.com/fjordlog/fjord/controller"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs and IncrementalAlterConfigs: each resource is decided by
// controller.AlterConfigs against the image and the broker's ConfigPolicy;
// the records of every accepted resource are proposed as one batch (unless
// validateOnly), so a request's accepted changes land together.

// IncrementalChanges is an IncrementalAlterConfigs request's changes, one
// per resource in order.
func IncrementalChanges(req *kmsg.IncrementalAlterConfigsRequest) []controller.ConfigChange {
	changes := make([]controller.ConfigChange, len(req.Resources))
	for i, rr := range req.Resources {
		ch := controller.ConfigChange{Resource: controller.ConfigResource{Type: controller.ResourceType(rr.ResourceType), Name: rr.ResourceName}}
		for _, cf := range rr.Configs {
			ch.Ops = append(ch.Ops, controller.ConfigAlteration{Key: cf.Name, Op: controller.ConfigOp(cf.Op), Value: cf.Value})
		}
		changes[i] = ch
	}
	return changes
}

// LegacyChanges is an AlterConfigs request's changes: each replaces its
// resource's whole set.
func LegacyChanges(req *kmsg.AlterConfigsRequest) []controller.ConfigChange {
	changes := make([]controller.ConfigChange, len(req.Resources))
	for i, rr := range req.Resources {
		ch := controller.ConfigChange{Resource: controller.ConfigResource{Type: controller.ResourceType(rr.ResourceType), Name: rr.ResourceName}, Replace: true}
		for _, cf := range rr.Configs {
			ch.Ops = append(ch.Ops, controller.ConfigAlteration{Key: cf.Name, Op: controller.OpSet, Value: cf.Value})
		}
		changes[i] = ch
	}
	return changes
}

func (c *Controller) incrementalAlterConfigs(ctx context.Context, img *controller.Image, req *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	results, perr := c.alterConfigs(ctx, img, IncrementalChanges(req), req.ValidateOnly)
	for i, r := range results {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = req.Resources[i].ResourceType, req.Resources[i].ResourceName
		sr.ErrorCode, sr.ErrorMessage = resultCode(r, perr)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

func (c *Controller) legacyAlterConfigs(ctx context.Context, img *controller.Image, req *kmsg.AlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	results, perr := c.alterConfigs(ctx, img, LegacyChanges(req), req.ValidateOnly)
	for i, r := range results {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = req.Resources[i].ResourceType, req.Resources[i].ResourceName
		sr.ErrorCode, sr.ErrorMessage = resultCode(r, perr)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

// alterConfigs decides the changes and proposes the accepted ones.
func (c *Controller) alterConfigs(ctx context.Context, img *controller.Image, changes []controller.ConfigChange, validateOnly bool) ([]controller.ConfigResult, error) {
	results := controller.AlterConfigs(img, changes, c.cfg.ConfigPolicy)
	var recs []controller.Record
	for _, r := range results {
		recs = append(recs, r.Records...)
	}
	if validateOnly || len(recs) == 0 {
		return results, nil
	}
	_, err := c.propose(ctx, recs)
	if err == nil {
		for _, r := range results {
			if len(r.Records) > 0 {
				c.log.Info().Int8("resource_type", int8(r.Resource.Type)).Str("resource", r.Resource.Name).Int("keys", len(r.Records)).Msg("altered configs")
			}
		}
	}
	return results, err
}

// resultCode is the error code and message for one resource's result.
func resultCode(r controller.ConfigResult, perr error) (int16, *string) {
	if r.ErrorCode != 0 {
		m := r.Message
		return r.ErrorCode, &m
	}
	if perr != nil && len(r.Records) > 0 {
		return proposeCode(perr), nil
	}
	return 0, nil
}
