// Package s3 is a remote.Store on an S3-compatible bucket (AWS S3,
// SeaweedFS, MinIO, ...), built on the AWS SDK for Go v2.
//
// Design:
//
//   - Put is one PutObject. S3 makes an object visible only when its PUT
//     completes, so a failed or cancelled Put leaves the key as it was:
//     the atomicity remote.Store asks for. A single PUT holds up to 5 GiB,
//     far above log.segment.bytes' 1 GiB default; bigger bodies are
//     refused rather than split, because a multipart upload would need an
//     abort path on every failure to keep that promise, and Fjord's
//     segments never need it.
//   - Get is a ranged GetObject. S3 answers a range starting at the end
//     of an object with 416; the Store then asks the object's size
//     (HeadObject) to tell "at the end" (an empty read, as remote.Store
//     specifies) from "past the end" (io.ErrUnexpectedEOF).
//   - Every error is mapped to a remote sentinel (classify) with the
//     operation, bucket and key as context; the S3 error code stays in
//     the message.
//   - Retries are the SDK's standard retryer with an explicit bound
//     (Config.MaxAttempts, default 3) and a short backoff cap, and no
//     retry quota, so a store that is down fails a call within a bound
//     (about MaxAttempts × (DialTimeout + MaxBackoff)) instead of hanging
//     or failing at random once a shared quota runs dry. Callers above
//     add their own backoff (remote's contract).
//   - Config.KeyPrefix (rsm.config.key.prefix) is prepended to every key
//     and stripped from List's results, so callers see the keys they
//     chose.
//
// Credentials are the static keys given (rsm.config.storage.aws.*), or
// else the SDK's default chain: AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, the shared files (~/.aws), then instance roles.
//
// The weedtest subpackage starts a SeaweedFS server (weed mini) for the
// tests of this package and of the tiering code above it.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fjordlog/fjord/storage/remote"
)

// Config says which bucket to use and how to reach it.
type Config struct {
	// Endpoint is the S3 endpoint URL (http://host:port for SeaweedFS or
	// MinIO); "" = AWS's own endpoint for Region.
	Endpoint string
	// Region is the bucket's region; "" = the SDK's (AWS_REGION, ~/.aws),
	// else us-east-1, which S3-compatible stores accept.
	Region string
	// Bucket must exist: the Store never creates it (CheckBucket says
	// when it is missing).
	Bucket string
	// PathStyle addresses the bucket as endpoint/bucket/key rather than
	// bucket.endpoint/key: S3-compatible stores on an IP or localhost
	// need it.
	PathStyle bool
	// AccessKeyID and SecretAccessKey are static credentials; both empty
	// = the SDK's default chain (environment, shared files, roles).
	AccessKeyID     string
	SecretAccessKey string
	// KeyPrefix is prepended to every key ("" = none).
	KeyPrefix string
	// MaxAttempts bounds the attempts of one call, the first included;
	// 0 = 3.
	MaxAttempts int
	// MaxBackoff caps the pause between two attempts; 0 = 1 s.
	MaxBackoff time.Duration
	// DialTimeout bounds each TCP connect; 0 = 5 s.
	DialTimeout time.Duration
	// ResponseTimeout bounds the wait for a response's headers (not the
	// transfer of its body); 0 = 30 s.
	ResponseTimeout time.Duration
}

// maxPutBytes is the largest object one PutObject may store (S3's limit).
const maxPutBytes = 5 << 30

// Store is a remote.Store on one bucket. It is safe for concurrent use.
type Store struct {
	client *s3.Client
	bucket string
	prefix string
}

var _ remote.Store = (*Store)(nil)

// New returns a Store for cfg. It does not contact the store: call
// CheckBucket for that.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3: no bucket name given")
	}
	if (cfg.AccessKeyID == "") != (cfg.SecretAccessKey == "") {
		return nil, errors.New("s3: give both the access key id and the secret access key, or neither (to use the AWS environment variables or files)")
	}
	attempts := cfg.MaxAttempts
	if attempts <= 0 {
		attempts = 3
	}
	maxBackoff := orDefault(cfg.MaxBackoff, time.Second)
	dialer := &net.Dialer{Timeout: orDefault(cfg.DialTimeout, 5*time.Second), KeepAlive: 30 * time.Second}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.DialContext = dialer.DialContext
		t.ResponseHeaderTimeout = orDefault(cfg.ResponseTimeout, 30*time.Second)
		t.MaxIdleConnsPerHost = 16
	})
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithHTTPClient(httpClient),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = attempts
				o.MaxBackoff = maxBackoff
				o.RateLimiter = ratelimit.None
			})
		}),
		// Checksums only where S3 requires them: S3-compatible stores
		// differ in their support of the newer trailing checksums, and
		// Fjord's segments carry their own CRCs.
		awsconfig.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		awsconfig.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: load the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
	})
	return &Store{client: client, bucket: cfg.Bucket, prefix: cfg.KeyPrefix}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// CheckBucket asks the store whether the bucket exists and the
// credentials may use it (HeadBucket), for start-up: its error says
// which of the two is wrong (remote.ErrNoBucket, remote.ErrAccessDenied)
// or that the store cannot be reached (remote.ErrUnavailable).
func (s *Store) CheckBucket(ctx context.Context) error {
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.bucket})
	if err != nil {
		return s.wrap("check bucket", "", err, true)
	}
	return nil
}

// Put stores size bytes of body under key with one PutObject. body must
// give exactly size bytes. An io.ReadSeeker (a file, a *bytes.Reader)
// is checked before the request and can be re-sent by a retry; any other
// reader is streamed once, unsigned, and a failed attempt is not retried.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if size < 0 || size > maxPutBytes {
		return fmt.Errorf("s3: put %s: %d bytes: one PUT holds 0 to %d", key, size, int64(maxPutBytes))
	}
	if rs, ok := body.(io.ReadSeeker); ok {
		// Check the length up front: a longer body would otherwise be
		// cut at size without a word, a shorter one fail mid-request.
		cur, err := rs.Seek(0, io.SeekCurrent)
		if err != nil {
			return fmt.Errorf("s3: put %s: %w", key, err)
		}
		end, err := rs.Seek(0, io.SeekEnd)
		if err != nil {
			return fmt.Errorf("s3: put %s: %w", key, err)
		}
		if _, err := rs.Seek(cur, io.SeekStart); err != nil {
			return fmt.Errorf("s3: put %s: %w", key, err)
		}
		if end-cur != size {
			return fmt.Errorf("s3: put %s: body has %d bytes, want %d", key, end-cur, size)
		}
	} else {
		body = &exactReader{r: body, left: size}
	}
	in := &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           aws.String(s.prefix + key),
		Body:          body,
		ContentLength: aws.Int64(size),
	}
	_, err := s.client.PutObject(ctx, in, func(o *s3.Options) {
		if _, seekable := body.(io.ReadSeeker); !seekable {
			// A stream cannot be read twice to hash it for the
			// signature: sign the headers only (S3 allows it).
			o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
		}
	})
	if err != nil {
		return s.wrap("put", key, err, false)
	}
	return nil
}

// exactReader passes on exactly left bytes of r and fails the read
// when r has fewer or more. A longer r is caught before its last wanted
// byte is passed on (by reading one byte ahead), so the store never
// receives a complete body and stores nothing: an HTTP client sends
// Content-Length bytes and may take the answer before it sees the rest.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	switch {
	case e.left == 0:
		var one [1]byte
		if k, _ := io.ReadFull(e.r, one[:]); k > 0 {
			return 0, errors.New("body is longer than its size")
		}
		return n, nil
	case err == io.EOF:
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

// Get returns n bytes of key from off (n < 0: to the end).
func (s *Store) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("s3: get %s at %d: %w", key, off, io.ErrUnexpectedEOF)
	}
	if n == 0 {
		return s.emptyAt(ctx, key, off)
	}
	rng := fmt.Sprintf("bytes=%d-", off)
	if n > 0 {
		rng = fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key), Range: &rng})
	if err != nil {
		var re *awshttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable {
			return s.emptyAt(ctx, key, off)
		}
		return nil, s.wrap("get", key, err, false)
	}
	return out.Body, nil
}

// emptyAt is a Get of nothing at off: an empty reader when off is within
// the object or at its end, io.ErrUnexpectedEOF past it.
func (s *Store) emptyAt(ctx context.Context, key string, off int64) (io.ReadCloser, error) {
	h, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key)})
	if err != nil {
		return nil, s.wrap("get", key, err, false)
	}
	size := aws.ToInt64(h.ContentLength)
	if off > size {
		return nil, fmt.Errorf("s3: get %s at %d of %d bytes: %w", key, off, size, io.ErrUnexpectedEOF)
	}
	return io.NopCloser(strings.NewReader("")), nil
}

// Delete removes key; S3 answers success for a missing key.
func (s *Store) Delete(ctx context.Context, key string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key)})
	if err != nil {
		return s.wrap("delete", key, err, false)
	}
	return nil
}

// List returns the objects under prefix in key order (S3 lists in UTF-8
// byte order, which is Go's string order).
func (s *Store) List(ctx context.Context, prefix string) ([]remote.Object, error) {
	var out []remote.Object
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.prefix + prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list", prefix, err, false)
		}
		for _, o := range page.Contents {
			out = append(out, remote.Object{
				Key:      strings.TrimPrefix(aws.ToString(o.Key), s.prefix),
				Size:     aws.ToInt64(o.Size),
				Modified: aws.ToTime(o.LastModified),
			})
		}
	}
	return out, nil
}

// wrap gives err its remote kind and its context: the operation, the
// bucket and the key (as the caller named it).
func (s *Store) wrap(op, key string, err error, bucketOp bool) error {
	where := "bucket " + s.bucket
	if key != "" {
		where += " key " + s.prefix + key
	}
	kind := classify(err, bucketOp)
	if kind == nil {
		return fmt.Errorf("s3: %s (%s): %w", op, where, err)
	}
	return fmt.Errorf("s3: %s (%s): %w: %w", op, where, kind, err)
}

// classify maps an SDK error to a remote sentinel, nil when none fits
// (a cancelled context, a request S3 refused as malformed). bucketOp:
// the request named no key, so a bare 404 means the bucket is missing.
func classify(err error, bucketOp bool) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey":
			return remote.ErrNotFound
		case "NoSuchBucket":
			return remote.ErrNoBucket
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden", "AllAccessDisabled", "InvalidToken", "ExpiredToken", "AccountProblem":
			return remote.ErrAccessDenied
		case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout":
			return remote.ErrUnavailable
		}
	}
	// A request that was never answered also comes as a ResponseError,
	// with status 0: it is judged below, by its network error.
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() != 0 {
		switch code := re.HTTPStatusCode(); {
		case code == http.StatusNotFound && bucketOp:
			return remote.ErrNoBucket
		case code == http.StatusNotFound:
			// HEAD answers have no body, so no error code: a key's 404.
			return remote.ErrNotFound
		case code == http.StatusForbidden || code == http.StatusUnauthorized:
			return remote.ErrAccessDenied
		case code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout:
			return remote.ErrUnavailable
		}
		return nil
	}
	// No HTTP response at all: the store could not be reached (refused
	// or timed-out dials, resets, response timeouts, a deadline).
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return remote.ErrUnavailable
	}
	var rae *retry.MaxAttemptsError
	if errors.As(err, &rae) {
		return remote.ErrUnavailable
	}
	return nil
}
