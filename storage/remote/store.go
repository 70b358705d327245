package remote

import (
	"context"
	"errors"
	"io"
	"time"
)

// Store is an object store holding tiered segments and their sidecar
// files under keys chosen by the caller.
type Store interface {
	// Put stores size bytes read from body under key, replacing any object
	// there. The object becomes visible only once complete: a Put that
	// fails or is cancelled leaves the key as it was.
	Put(ctx context.Context, key string, body io.Reader, size int64) error
	// Get returns the bytes of key from off, n of them (n < 0: to the
	// end). Reading past the end returns what there is; an off past the
	// end is io.ErrUnexpectedEOF. The caller closes the reader.
	Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the objects whose key starts with prefix, in key
	// order.
	List(ctx context.Context, prefix string) ([]Object, error)
}

// Object describes one stored object.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time
}

// The kinds of failure a Store reports, wrapped with context
// (errors.Is finds them).
var (
	// ErrNotFound: the key holds no object.
	ErrNotFound = errors.New("remote: object not found")
	// ErrAccessDenied: the store refused the credentials or the request
	// (revoked keys, a policy that forbids it).
	ErrAccessDenied = errors.New("remote: access denied")
	// ErrNoBucket: the bucket does not exist.
	ErrNoBucket = errors.New("remote: bucket does not exist")
	// ErrUnavailable: the store could not be reached or answered with a
	// server error; worth retrying later.
	ErrUnavailable = errors.New("remote: store unavailable")
)

// Kind names the failure kind of err for metrics and logs: "not_found",
// "access_denied", "no_bucket", "unavailable", "canceled", or "other".
func Kind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrAccessDenied):
		return "access_denied"
	case errors.Is(err, ErrNoBucket):
		return "no_bucket"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	default:
		return "other"
	}
}
