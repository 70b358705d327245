package sharepart

import (
	"errors"
	"slices"
	"testing"
)

func TestMerge(t *testing.T) {
	base := []StateBatch{{10, 19, Available, 1}, {20, 29, Acknowledged, 1}}
	more := []StateBatch{{15, 24, Available, 2}, {30, 30, Available, 0}, {31, 31, Acquired, 1}}
	baseCopy, moreCopy := slices.Clone(base), slices.Clone(more)
	got := Merge(12, base, more)
	want := []StateBatch{{12, 14, Available, 1}, {15, 24, Available, 2}, {25, 29, Acknowledged, 1}, {31, 31, Available, 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("Merge = %v, want %v", got, want)
	}
	if !slices.Equal(base, baseCopy) || !slices.Equal(more, moreCopy) {
		t.Fatal("Merge modified its inputs")
	}
	// -1 keeps everything.
	if got := Merge(-1, base, nil); !slices.Equal(got, base) {
		t.Fatalf("Merge(-1) = %v, want %v", got, base)
	}
	if got := Merge(5, nil, nil); len(got) != 0 {
		t.Fatalf("Merge of nothing = %v", got)
	}
}

func TestCheckBatches(t *testing.T) {
	if err := CheckBatches(0, []StateBatch{{0, 1, Archived, 3}}); err != nil {
		t.Fatal(err)
	}
	for _, bs := range [][]StateBatch{
		{{5, 4, Available, 1}},
		{{-1, 4, Available, 1}},
		{{0, 4, State(3), 1}},
		{{0, 4, Available, -1}},
	} {
		if err := CheckBatches(0, bs); !errors.Is(err, ErrCorrupt) {
			t.Errorf("CheckBatches(%v) = %v, want ErrCorrupt", bs, err)
		}
	}
	if err := CheckBatches(-2, nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("start -2: %v", err)
	}
}
