package tier

import (
	"context"
	"errors"
	"sync"

	"github.com/fjordlog/fjord/storage/remote"
)

// ReadHealth follows whether the node's reads of the remote store work,
// so a store that is down is logged once when reads start failing (and
// when the kind of failure changes) and once when they work again, not
// once per consumer fetch that retries.
//
// Invariant: kind is "" while reads work, else the kind (remote.Kind, or
// "damaged") of the last failed read; it changes only in Note, under mu.
type ReadHealth struct {
	mu   sync.Mutex
	kind string
}

// Note records a read's outcome and reports whether it changed the
// state, and the kind now ("" once reads work). A read that found
// nothing to read (err nil), or a segment deleted meanwhile
// (ErrSegmentGone), counts as working; one cancelled by its fetch (the
// client went away) says nothing about the store.
func (h *ReadHealth) Note(err error) (changed bool, kind string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil, errors.Is(err, ErrSegmentGone):
	case errors.Is(err, context.Canceled):
		return false, h.kind
	case errors.Is(err, ErrDamaged):
		kind = "damaged"
	default:
		kind = remote.Kind(err)
	}
	if h.kind == kind {
		return false, kind
	}
	h.kind = kind
	return true, kind
}
