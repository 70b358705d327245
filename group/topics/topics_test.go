package topics

import (
	"reflect"
	"testing"
)

func TestImage(t *testing.T) {
	a := Topic{Name: "a", ID: [16]byte{2}, Partitions: 3}
	b := Topic{Name: "b", ID: [16]byte{1}, Partitions: 1}
	img := NewImage([]Topic{
		b, a,
		{Name: "a", ID: [16]byte{9}, Partitions: 5}, // same name: first kept
		{Name: "c", ID: [16]byte{2}, Partitions: 5}, // same id: first kept
		{Name: "d", ID: [16]byte{4}},                // no partitions yet
		{ID: [16]byte{5}, Partitions: 1},            // no name
	})
	if got := img.Topics(); !reflect.DeepEqual(got, []Topic{a, b}) {
		t.Fatalf("topics %v", got)
	}
	if got, ok := img.ByName("b"); !ok || got != b {
		t.Fatalf("ByName: %v %v", got, ok)
	}
	if got, ok := img.ByID([16]byte{2}); !ok || got != a {
		t.Fatalf("ByID: %v %v", got, ok)
	}
	if got := img.Resolve([]string{"a", "x", "b"}); !reflect.DeepEqual(got, []Topic{b, a}) {
		t.Fatalf("Resolve: %v", got)
	}

	if h := img.MetadataHash([]string{"x"}); h != 0 {
		t.Fatalf("hash of nothing: %d", h)
	}
	h := img.MetadataHash([]string{"b", "a"})
	if h == 0 || h != img.MetadataHash([]string{"a", "x", "b"}) {
		t.Fatalf("hash depends on order or unknown names: %d", h)
	}
	more := NewImage([]Topic{a, {Name: "b", ID: b.ID, Partitions: 2}})
	if more.MetadataHash([]string{"a", "b"}) == h {
		t.Fatal("hash blind to a partition count")
	}

	var none *Image
	if _, ok := none.ByName("a"); ok || none.Topics() != nil || none.MetadataHash([]string{"a"}) != 0 {
		t.Fatal("a nil Image has topics")
	}
}
