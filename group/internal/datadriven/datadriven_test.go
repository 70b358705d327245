package datadriven

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.txt")
	const file = "# a comment\n\ncmd a=1 b\n----\nline 1\nline 2\n\nnext\n----\nok\n"
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	got := Parse(t, path)
	want := []Chunk{
		{Text: "# a comment"},
		{Text: ""},
		{Case: &Case{Pos: path + ":3", Line: "cmd a=1 b", Cmd: "cmd", Args: []Arg{{"a", "1"}, {"b", ""}}, Expected: "line 1\nline 2"}},
		{Text: ""},
		{Case: &Case{Pos: path + ":8", Line: "next", Cmd: "next", Expected: "ok"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	var seen []string
	Run(t, path, func(c *Case) string {
		seen = append(seen, c.Cmd)
		if c.Cmd == "cmd" {
			return "line 1\nline 2\n"
		}
		return "" // written "ok"
	})
	if !reflect.DeepEqual(seen, []string{"cmd", "next"}) {
		t.Fatalf("ran %v", seen)
	}
}

func TestArgs(t *testing.T) {
	c := &Case{Args: []Arg{{"n", "7"}, {"s", "a%20b"}, {"flag", ""}, {"n", "8"}}}
	a := c.Map()
	if a.Num("n", 0) != 8 || a.Num("x", 3) != 3 || a.Str("s", "") != "a b" || a.Str("x", "d") != "d" ||
		!a.Has("flag") || a.Has("x") || *a.Ptr("s") != "a b" || a.Ptr("x") != nil {
		t.Fatalf("args %v", a)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a non-number did not panic")
		}
	}()
	a.Num("s", 0)
}
