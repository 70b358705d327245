package active

import (
	"context"

	"github.com/fjordlog/fjord/controller"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterClientQuotas decides an AlterClientQuotas (KIP-546) forwarded by a
// broker: each entry on its own (controller.AlterClientQuotas), the valid
// ones proposed as one batch unless the request only validates.
func (c *Controller) alterClientQuotas(ctx context.Context, img *controller.Image, req *kmsg.AlterClientQuotasRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	entries := make([]controller.QuotaAlteration, len(req.Entries))
	for i, re := range req.Entries {
		for _, e := range re.Entity {
			entries[i].Entity = append(entries[i].Entity, controller.QuotaEntityPart{Type: e.Type, Name: e.Name})
		}
		for _, op := range re.Ops {
			entries[i].Ops = append(entries[i].Ops, controller.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
	}
	results := controller.AlterClientQuotas(img, entries)
	var recs []controller.Record
	for _, r := range results {
		recs = append(recs, r.Records...)
	}
	var perr error
	if !req.ValidateOnly {
		_, perr = c.propose(ctx, recs)
	}
	for i, r := range results {
		se := kmsg.NewAlterClientQuotasResponseEntry()
		for _, e := range req.Entries[i].Entity {
			re := kmsg.NewAlterClientQuotasResponseEntryEntity()
			re.Type, re.Name = e.Type, e.Name
			se.Entity = append(se.Entity, re)
		}
		switch {
		case r.ErrorCode != 0:
			se.ErrorCode = r.ErrorCode
			m := r.Message
			se.ErrorMessage = &m
		case perr != nil:
			se.ErrorCode = proposeCode(perr)
		}
		resp.Entries = append(resp.Entries, se)
	}
	if len(recs) > 0 && perr == nil && !req.ValidateOnly {
		c.log.Info().Int("changes", len(recs)).Msg("client quotas altered")
	}
	return resp
}
