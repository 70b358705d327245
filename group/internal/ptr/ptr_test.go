package ptr

import "testing"

func TestPtr(t *testing.T) {
	a, b, c := "x", "x", "y"
	if !Equal[string](nil, nil) || Equal(&a, nil) || Equal(nil, &a) || !Equal(&a, &b) || Equal(&a, &c) {
		t.Fatal("Equal")
	}
	if Clone[string](nil) != nil {
		t.Fatal("Clone(nil)")
	}
	if p := Clone(&a); p == &a || *p != a {
		t.Fatal("Clone shares or differs")
	}
}
