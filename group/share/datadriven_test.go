package share

import (
	"testing"

	"github.com/fjordlog/fjord/group/internal/datadriven"
)

// TestDataDriven runs testdata/*.txt, each file on a fresh harness (see
// harness_test.go for the commands). go test ./group/share -run TestDataDriven
// -rewrite regenerates the expected output; review the diff.
func TestDataDriven(t *testing.T) {
	datadriven.RunDir(t, "testdata", func(t *testing.T) func(*datadriven.Case) string {
		return newHarness(t).do
	})
}
