package active

import (
	"context"

	"github.com/fjordlog/fjord/controller"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterUserScramCredentials decides an AlterUserScramCredentials (KIP-554)
// forwarded by a broker: per user (controller.AlterUserScramCredentials),
// the accepted users' credentials proposed as one batch.
func (c *Controller) alterUserScramCredentials(ctx context.Context, img *controller.Image, req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var dels []controller.ScramDeletion
	for _, d := range req.Deletions {
		dels = append(dels, controller.ScramDeletion{User: d.Name, Mechanism: d.Mechanism})
	}
	var ups []controller.ScramUpsertion
	for _, u := range req.Upsertions {
		ups = append(ups, controller.ScramUpsertion{User: u.Name, Mechanism: u.Mechanism, Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword})
	}
	recs, results := controller.AlterUserScramCredentials(img, dels, ups)
	var perr error
	if len(recs) > 0 {
		_, perr = c.propose(ctx, recs)
	}
	for _, r := range results {
		rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		rr.User = r.User
		switch {
		case r.ErrorCode != 0:
			rr.ErrorCode = r.ErrorCode
			m := r.Message
			rr.ErrorMessage = &m
		case perr != nil:
			rr.ErrorCode = proposeCode(perr)
		}
		resp.Results = append(resp.Results, rr)
	}
	if len(recs) > 0 && perr == nil {
		c.log.Info().Int("changes", len(recs)).Msg("SCRAM credentials altered")
	}
	return resp
}
