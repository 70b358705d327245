package tier

import (
	"context"
	"fmt"
	"testing"

	"github.com/fjordlog/fjord/storage/remote"
)

// A store down for many retried reads is one change to failing and one
// back; a cancelled read changes nothing; a new kind of failure is a
// change.
func TestReadHealthEdges(t *testing.T) {
	var h ReadHealth
	down := fmt.Errorf("get: %w", remote.ErrUnavailable)
	steps := []struct {
		err     error
		changed bool
		kind    string
	}{
		{nil, false, ""},
		{down, true, "unavailable"},
		{down, false, "unavailable"},
		{context.Canceled, false, "unavailable"},
		{fmt.Errorf("x: %w", remote.ErrAccessDenied), true, "access_denied"},
		{fmt.Errorf("x: %w", ErrDamaged), true, "damaged"},
		{nil, true, ""},
		{nil, false, ""},
	}
	for i, s := range steps {
		changed, kind := h.Note(s.err)
		if changed != s.changed || kind != s.kind {
			t.Fatalf("step %d (%v): changed %v kind %q, want %v %q", i, s.err, changed, kind, s.changed, s.kind)
		}
	}
}
