package txn

import (
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs testdata/*.txt through the harness (harness_test.go
// lists the commands). go test ./broker/txn -run TestDataDriven -rewrite
// regenerates the expected output; review the diff.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			h.t = t
			return h.do(t, d)
		})
	})
}
