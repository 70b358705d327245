package config

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Only the level in force is accepted; v0's "level < 1 deletes" applies to
// v0 alone; unknown features and upgrade types are refused.
func TestCheckFeatureUpdate(t *testing.T) {
	for _, tc := range []struct {
		version int16
		name    string
		level   int16
		typ     int8
		ok      bool
	}{
		{1, "metadata.version", MetadataVersionLevel, 1, true},
		{1, "transaction.version", TransactionVersionLevel, 1, true},
		{1, "group.version", GroupVersionLevel, 1, true},
		{1, "group.version", 0, 2, false},
		{1, "kraft.version", 0, 2, true},
		{0, "kraft.version", -1, 0, true}, // v0: delete an unfinalized feature
		{1, "kraft.version", -1, 2, false},
		{1, "kraft.version", 1, 1, false},
		{1, "metadata.version", 25, 1, false},
		{1, "metadata.version", 20, 2, false},
		{1, "transaction.version", 2, 1, false},
		{1, "metadata.version", MetadataVersionLevel, 9, false},
		{2, "no.such.feature", 0, 1, false},
	} {
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = tc.name, tc.level, tc.typ
		if err := checkFeatureUpdate(tc.version, u); (err == nil) != tc.ok {
			t.Errorf("v%d %s to %d (type %d): %v, want ok=%v", tc.version, tc.name, tc.level, tc.typ, err, tc.ok)
		}
	}
}
