package main

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestFormatRecord(t *testing.T) {
	r := &kgo.Record{Topic: "t", Partition: 2, Offset: 7, Key: []byte("k"), Value: []byte("vv"),
		Timestamp: time.UnixMilli(1234), Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}}}
	for f, want := range map[string]string{
		"":                         "vv\n",
		`%k %v %p %o %T\n`:         "k vv 2 7 1234\n",
		`%t[%p]@%o %K/%S %h 100%%`: "t[2]@7 1/2 a=1,b=2 100%",
		`%x\t\\`:                   "%x\t\\",
	} {
		if got := formatRecord(f, r); got != want {
			t.Errorf("format %q: %q, want %q", f, got, want)
		}
	}
}

// Flags may follow positional arguments, as the Kafka tools take them.
func TestCLIParseInterleaved(t *testing.T) {
	var errOut bytes.Buffer
	c := newCLI("fjord topic create", &errOut, &errOut)
	parts := c.fs.Int("partitions", -1, "")
	var cfg kvFlag
	c.fs.Var(&cfg, "config", "")
	if _, ok := c.parse([]string{"orders", "--partitions", "6", "--config", "a=1", "--json", "--config", "b=x=y"}, 1, 1); !ok {
		t.Fatalf("parse: %s", errOut.String())
	}
	if len(c.args) != 1 || c.args[0] != "orders" || *parts != 6 || !*c.json || *cfg.m["a"] != "1" || *cfg.m["b"] != "x=y" {
		t.Fatalf("args %v partitions %d json %v config %v", c.args, *parts, *c.json, cfg.m)
	}
	c = newCLI("fjord topic create", &errOut, &errOut)
	if code, ok := c.parse([]string{"a", "b"}, 1, 1); ok || code != exitUsage {
		t.Fatalf("two names: ok %v code %d", ok, code)
	}
	t.Setenv("FJORD_BOOTSTRAP", "h1:1, h2:2")
	c = newCLI("x", &errOut, &errOut)
	if s := c.seeds(); len(s) != 2 || s[1] != "h2:2" {
		t.Fatalf("seeds from $FJORD_BOOTSTRAP: %v", s)
	}
}

func TestConfigAlters(t *testing.T) {
	alters, err := configAlters([]string{"log.retention.ms=1000,listener.x=[a,b]", "c=d"}, []string{"e,f"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range alters {
		v := "-"
		if a.Value != nil {
			v = *a.Value
		}
		got = append(got, fmt.Sprintf("%v %s=%s", a.Op, a.Name, v))
	}
	want := []string{"0 log.retention.ms=1000", "0 listener.x=a,b", "0 c=d", "1 e=-", "1 f=-"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, bad := range [][2][]string{{{"k"}, nil}, {{"k=1"}, {"k"}}, {nil, nil}, {{"=1"}, nil}} {
		if _, err := configAlters(bad[0], bad[1]); err == nil {
			t.Errorf("configAlters(%q, %q): no error", bad[0], bad[1])
		}
	}
}
