// Package ptr compares and copies the pointers that stand for Kafka's
// nullable fields (instance id, rack, regular expression, assignor) in
// group/consumer and group/share, where nil is null.
package ptr

// Equal reports whether a and b are both null or point to equal values.
func Equal[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Clone returns a pointer to a copy of *p, nil for nil, so that a group
// never shares a pointer with the request or response it came from.
func Clone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
