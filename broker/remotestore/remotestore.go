// Package remotestore opens the object store tiered storage (KIP-405)
// uploads to, from the node's configuration: an s3.Store on the bucket of
// the rsm.config.storage.s3.* keys when remote.log.storage.system.enable
// is set, nothing otherwise. It is the one place that turns those keys
// into a store, so the remote log manager and start-up see the same one.
//
// Start-up (cmd/fjord, before broker.New) calls Check: a bucket that does
// not exist, or that refuses the credentials, is a configuration error an
// operator must fix, so the node refuses to start and says which. A store
// that cannot be reached is not: refusing to start then would keep every
// node of a cluster down while S3 is, so the node starts, logs it once,
// and the remote log manager retries with its own backoff.
package remotestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/storage/remote"
	"github.com/fjordlog/fjord/storage/remote/s3"
)

// S3Config is the s3.Config of the node's rsm.config.storage.s3.* keys.
func S3Config(c *config.Config) s3.Config {
	r := c.Remote.S3
	return s3.Config{
		Endpoint:        r.Endpoint,
		Region:          r.Region,
		Bucket:          r.Bucket,
		PathStyle:       r.PathStyle,
		AccessKeyID:     r.AccessKeyID,
		SecretAccessKey: r.SecretAccessKey,
		KeyPrefix:       r.KeyPrefix,
	}
}

// Open returns the store c names: nil (and no error) when
// remote.log.storage.system.enable is false. It does not contact the
// store; Check does.
func Open(ctx context.Context, c *config.Config) (remote.Store, error) {
	if !c.Remote.Enable {
		return nil, nil
	}
	st, err := s3.New(ctx, S3Config(c))
	if err != nil {
		return nil, fmt.Errorf("tiered storage: %w", err)
	}
	return st, nil
}

// checkTimeout bounds Check: the SDK's retries are bounded too, this
// is the bound on the whole.
const checkTimeout = 30 * time.Second

// Check opens c's store and checks its bucket (HeadBucket). It returns
// an error, naming the keys to fix, when the bucket does not exist or
// refuses the credentials; when the store cannot be reached it logs a
// warning and returns nil. Nothing is checked when tiered storage is off.
func Check(ctx context.Context, c *config.Config, log zerolog.Logger) error {
	st, err := Open(ctx, c)
	if err != nil || st == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	err = st.(*s3.Store).CheckBucket(ctx)
	r := c.Remote.S3
	switch {
	case err == nil:
		log.Info().Str("endpoint", r.Endpoint).Str("bucket", r.Bucket).Str("key_prefix", r.KeyPrefix).Msg("tiered storage: bucket reachable")
		return nil
	case errors.Is(err, remote.ErrNoBucket):
		return fmt.Errorf("tiered storage: bucket %q does not exist at %s (rsm.config.storage.s3.bucket.name, rsm.config.storage.s3.endpoint.url, rsm.config.storage.s3.region); create it, Fjord does not: %w", r.Bucket, endpointName(r.Endpoint), err)
	case errors.Is(err, remote.ErrAccessDenied):
		return fmt.Errorf("tiered storage: the store at %s refused the credentials for bucket %q (rsm.config.storage.aws.access.key.id and .secret.access.key, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY): %w", endpointName(r.Endpoint), r.Bucket, err)
	case errors.Is(err, remote.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		log.Warn().Err(err).Str("endpoint", r.Endpoint).Str("bucket", r.Bucket).Msg("tiered storage: the store cannot be reached; starting anyway, uploads and remote reads wait for it")
		return nil
	default:
		return fmt.Errorf("tiered storage: checking bucket %q at %s: %w", r.Bucket, endpointName(r.Endpoint), err)
	}
}

func endpointName(e string) string {
	if e == "" {
		return "AWS S3"
	}
	return e
}
