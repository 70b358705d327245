package broker

import (
	"context"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/active"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterUserScramCredentials: v0
//
// Behaviour (KIP-554):
//   - Forwarded to the active controller, which derives StoredKey and
//     ServerKey from the salted password the client computed and commits
//     them, with the salt and iteration count, to the metadata log
//     (ScramCredential records; neither the password nor the salted
//     password is stored). Every broker authenticates with them as its
//     image changes. The answer comes once this broker's image shows them.
//   - Per user, all or nothing, with Kafka's errors: a mechanism other than
//     SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2) UNSUPPORTED_SASL_MECHANISM;
//     fewer than 4096 or more than 16384 iterations, an empty name, salt or
//     salted password UNACCEPTABLE_CREDENTIAL; deleting a credential that
//     does not exist RESOURCE_NOT_FOUND; one user and mechanism altered
//     twice DUPLICATE_RESOURCE.
//
// Version notes:
//   - v0: flexible
func init() { regKey(51, 0, 0, handleAlterUserScramCredentials) }

func handleAlterUserScramCredentials(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	b.goLoop(func() {
		ctx, cancel := adminCtx(cc.ctx, 30000)
		defer cancel()
		resp, err := b.alterScram(ctx, req)
		if err != nil {
			resp = active.ErrorResponse(req, kerr.RequestTimedOut.Code).(*kmsg.AlterUserSCRAMCredentialsResponse)
		}
		resp.Version = req.Version
		respond(resp)
	})
}

// alterScram forwards req to the active controller and waits (bounded)
// for this broker's image to show what was accepted.
func (b *Broker) alterScram(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) (*kmsg.AlterUserSCRAMCredentialsResponse, error) {
	kresp, err := b.ctl.call(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, ok := kresp.(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !ok {
		return active.ErrorResponse(req, kerr.UnknownServerError.Code).(*kmsg.AlterUserSCRAMCredentialsResponse), nil
	}
	accepted := map[string]bool{}
	for _, r := range resp.Results {
		accepted[r.User] = r.ErrorCode == 0
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	b.waitImage(wctx, func(img *controller.Image) bool { return scramShows(img, req, accepted) })
	wcancel()
	return resp, nil
}
