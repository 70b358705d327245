package sasl

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// ScramBootstrap is one credential of fjord.sasl.scram.bootstrap, Fjord's
// counterpart of kafka-storage.sh format --add-scram.
type ScramBootstrap struct {
	Mechanism  string // SCRAM-SHA-256 or SCRAM-SHA-512
	User       string
	Password   string
	Iterations int32 // 4096 unless given
}

// ParseScramBootstrap parses entries in --add-scram's form, separated by
// ';' or ',' between them:
// SCRAM-SHA-256=[name=admin,password=admin-secret(,iterations=8192)].
// Messages never show a password.
func ParseScramBootstrap(s string) ([]ScramBootstrap, error) {
	var out []ScramBootstrap
	rest := strings.TrimSpace(s)
	for rest != "" {
		mech, after, ok := strings.Cut(rest, "=[")
		mech = strings.ToUpper(strings.TrimSpace(mech))
		if !ok || scramHash(mech) == nil {
			return nil, fmt.Errorf("want SCRAM-SHA-256=[name=...,password=...] or SCRAM-SHA-512=[...], got %q", trunc(rest))
		}
		body, tail, ok := strings.Cut(after, "]")
		if !ok {
			return nil, fmt.Errorf("%s: no closing ']'", mech)
		}
		b := ScramBootstrap{Mechanism: mech, Iterations: 4096}
		for kv := range strings.SplitSeq(body, ",") {
			k, v, ok := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			switch {
			case !ok:
				return nil, fmt.Errorf("%s: want key=value, got a bare %q", mech, trunc(k))
			case k == "name":
				b.User = strings.Trim(strings.TrimSpace(v), `"`)
			case k == "password":
				b.Password = strings.Trim(strings.TrimSpace(v), `"`)
			case k == "iterations":
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
				if err != nil || n < 4096 || n > 16384 {
					return nil, fmt.Errorf("%s: iterations %q: want 4096 to 16384", mech, v)
				}
				b.Iterations = int32(n)
			default:
				return nil, fmt.Errorf("%s: unknown key %q (name, password, iterations)", mech, trunc(k))
			}
		}
		if b.User == "" || b.Password == "" {
			return nil, fmt.Errorf("%s: name and password are both needed", mech)
		}
		out = append(out, b)
		rest = strings.TrimLeft(strings.TrimSpace(tail), ",;")
		rest = strings.TrimSpace(rest)
	}
	return out, nil
}

// AlterScram sends an AlterUserScramCredentials to the active controller
// and returns its answer once the broker's image holds what it committed.
type AlterScram func(context.Context, *kmsg.AlterUserSCRAMCredentialsRequest) (*kmsg.AlterUserSCRAMCredentialsResponse, error)

// BootstrapScram creates the credentials of value (fjord.sasl.scram.bootstrap,
// ParseScramBootstrap) that have lacks, through alter like any
// AlterUserScramCredentials: a credential that exists (set by an operator
// since, or by another node a moment ago) is left alone, so the key only
// ever creates a first admin. Each attempt gets 30 seconds; it is retried
// with backoff while the controller is unreachable or refuses, for at
// most a few minutes, or until ctx ends. A bad value does nothing (the
// broker's configuration check reported it).
func BootstrapScram(ctx context.Context, value string, have ScramLookup, alter AlterScram, log zerolog.Logger) {
	creds, err := ParseScramBootstrap(value)
	if err != nil || len(creds) == 0 {
		return
	}
	backoff := lifecycle.Backoff{Initial: 200 * time.Millisecond, Max: 15 * time.Second}
	for attempt := 0; attempt < 20; attempt++ {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		for _, c := range creds {
			m := controller.ScramMechanismNamed(c.Mechanism)
			if _, ok := have(c.Mechanism, c.User); ok {
				continue
			}
			salt := make([]byte, 32)
			rand.Read(salt)
			salted, err := pbkdf2.Key(m.Hash(), c.Password, salt, int(c.Iterations), m.Hash()().Size())
			if err != nil {
				log.Error().Err(err).Str("user", c.User).Msg("SCRAM bootstrap credential not derived")
				continue
			}
			u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
			u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = c.User, int8(m), c.Iterations, salt, salted
			req.Upsertions = append(req.Upsertions, u)
		}
		if len(req.Upsertions) == 0 {
			return
		}
		actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := alter(actx, req)
		cancel()
		if err == nil {
			failed := false
			for _, r := range resp.Results {
				if r.ErrorCode != 0 {
					failed = true
					log.Warn().Str("user", r.User).Int16("error_code", r.ErrorCode).Msg("SCRAM bootstrap credential refused")
				}
			}
			if !failed {
				log.Info().Int("credentials", len(req.Upsertions)).Msg("SCRAM bootstrap credentials created")
				return
			}
		} else if attempt == 0 {
			log.Warn().Err(err).Msg("SCRAM bootstrap credentials not created yet; retrying")
		}
		if !lifecycle.Sleep(ctx, backoff.Delay(attempt+1)) {
			return
		}
	}
	log.Error().Msg("SCRAM bootstrap credentials could not be created; set them with AlterUserScramCredentials (kafka-configs.sh --alter --add-config SCRAM-SHA-256=[...])")
}
