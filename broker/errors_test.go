package broker

import (
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/broker/partitions"
	"github.com/fjordlog/fjord/storage"
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

// A follower's fetch below the local log that the tiered copy holds is
// OFFSET_MOVED_TO_TIERED_STORAGE, though it wraps the out-of-range error
// the local log gave (which alone stays OFFSET_OUT_OF_RANGE).
func TestMovedToTieredStorage(t *testing.T) {
	oor := fmt.Errorf("log t-0: read at 3: %w", storage.ErrOffsetOutOfRange)
	if got := errorCode(fmt.Errorf("%w: t-0 at 3: %w", partitions.ErrMovedToTiered, oor)); got != kerr.OffsetMovedToTieredStorage.Code {
		t.Errorf("moved to tiered: code %d (%v)", got, kerr.ErrorForCode(got))
	}
	if got := errorCode(oor); got != kerr.OffsetOutOfRange.Code {
		t.Errorf("out of range: code %d (%v)", got, kerr.ErrorForCode(got))
	}
}
