package quorum

import (
	"errors"
	"fmt"

	"github.com/fjordlog/fjord/controller"
)

// A node that follows the metadata log without being a raft member (a
// broker-only node) is shipped what members apply: for each committed index
// the entry's record bytes, or nothing for an entry without a record (a
// new leader's empty entry, a membership change), plus, when it is too far
// behind, a snapshot of the image. ApplyEntry and DecodeImage rebuild
// exactly the image a member has at the same index.

// ApplyEntry applies the committed entry at index, given as its record
// bytes (nil for an entry without a record), as Member does: a record that
// does not apply is skipped, and the version always advances to index.
func ApplyEntry(img *controller.Image, index uint64, data []byte) (*controller.Image, error) {
	if index != img.Version()+1 {
		return nil, fmt.Errorf("quorum: entry %d applied after %d", index, img.Version())
	}
	next := img
	if len(data) > 0 {
		r, err := controller.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("quorum: entry %d: %w", index, err)
		}
		n, err := img.Apply(index, r)
		switch {
		case err == nil:
			next = n
		case !errors.Is(err, controller.ErrNotApplicable):
			return nil, fmt.Errorf("quorum: entry %d: %w", index, err)
		}
	}
	if next.Version() < index {
		return noop(next, index)
	}
	return next, nil
}

// EncodeImage encodes img as snapshot data.
func EncodeImage(img *controller.Image) ([]byte, error) {
	return encodeImage(img, brokerConfigs(img.BrokerConfigs()))
}

// DecodeImage rebuilds the image at version index from snapshot data.
func DecodeImage(data []byte, index uint64) (*controller.Image, error) {
	img, _, err := decodeImage(data, index)
	return img, err
}
