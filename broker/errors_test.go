package broker

import (
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A sick disk is KAFKA_STORAGE_ERROR, which clients retry, however deep
// the storage layer wrapped the system's error.
func TestDiskErrorsAreStorageErrors(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS} {
		err := fmt.Errorf("segment 42: %w", &fs.PathError{Op: "write", Path: "/data/t-0/00000000000000000042.log", Err: errno})
		if got := errorCode(err); got != kerr.KafkaStorageError.Code {
			t.Errorf("%v: code %d (%v), want KAFKA_STORAGE_ERROR", errno, got, kerr.ErrorForCode(got))
		}
	}
	if got := errorCode(fmt.Errorf("x: %w", syscall.EINVAL)); got != kerr.UnknownServerError.Code {
		t.Errorf("EINVAL: code %d, want UNKNOWN_SERVER_ERROR", got)
	}
}
