package broker

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/sasl"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// bootstrapScram creates the fjord.sasl.scram.bootstrap credentials that
// the metadata image lacks, through the active controller like any
// AlterUserScramCredentials: a credential that exists (set by an operator
// since, or by another node a moment ago) is left alone, so the key only
// ever creates a first admin. Retried with backoff while the controller
// is unreachable, for at most a few minutes.
func (b *Broker) bootstrapScram() {
	creds, err := sasl.ParseScramBootstrap(b.cfg.SASL.ScramBootstrap)
	if err != nil || len(creds) == 0 {
		return // Validate reported a bad value
	}
	backoff := lifecycle.Backoff{Initial: 200 * time.Millisecond, Max: 15 * time.Second}
	for attempt := 0; attempt < 20; attempt++ {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		img := b.image()
		for _, c := range creds {
			m := controller.ScramMechanismNamed(c.Mechanism)
			if _, ok := img.ScramCredential(c.User, m); ok {
				continue
			}
			salt := make([]byte, 32)
			rand.Read(salt)
			salted, err := pbkdf2.Key(m.Hash(), c.Password, salt, int(c.Iterations), m.Hash()().Size())
			if err != nil {
				b.log.Error().Err(err).Str("user", c.User).Msg("SCRAM bootstrap credential not derived")
				continue
			}
			u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
			u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = c.User, int8(m), c.Iterations, salt, salted
			req.Upsertions = append(req.Upsertions, u)
		}
		if len(req.Upsertions) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := api.ForwardTo[*kmsg.AlterUserSCRAMCredentialsResponse](ctx, forwarder{b}, req, api.UntimedWait, nil)
		cancel()
		if err == nil {
			failed := false
			for _, r := range resp.Results {
				if r.ErrorCode != 0 {
					failed = true
					b.log.Warn().Str("user", r.User).Int16("error_code", r.ErrorCode).Msg("SCRAM bootstrap credential refused")
				}
			}
			if !failed {
				b.log.Info().Int("credentials", len(req.Upsertions)).Msg("SCRAM bootstrap credentials created")
				return
			}
		} else if attempt == 0 {
			b.log.Warn().Err(err).Msg("SCRAM bootstrap credentials not created yet; retrying")
		}
		if !lifecycle.Sleep(b.ctx, backoff.Delay(attempt+1)) {
			return
		}
	}
	b.log.Error().Msg("SCRAM bootstrap credentials could not be created; set them with AlterUserScramCredentials (kafka-configs.sh --alter --add-config SCRAM-SHA-256=[...])")
}
