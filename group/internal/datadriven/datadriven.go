// Package datadriven runs the datadriven tests of the group packages
// (group, group/consumer, group/share, group/sharepart). A file is a
// sequence of cases:
//
//	# comments and blank lines between cases are kept
//	command key=value ...
//	----
//	expected output, one or more lines, ending at a blank line
//
// An empty output is written "ok". go test ./group/<pkg> -run TestDataDriven
// -rewrite regenerates the expected output of that package's files; review
// the diff. Args and ErrName are how every package's harness reads its
// commands and writes Kafka error codes.
//
// The format is cockroachdb/datadriven's (which other packages of this
// module use), but arguments are plain key=value words and outputs end at
// the first blank line; the group packages' files were written for this
// runner, so it stays.
//
// The package is imported by tests only. It defines the -rewrite flag
// itself because a flag can be defined once per test binary, and every
// package's tests run through Run.
package datadriven

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata expected output")

// Case is one command of a file with its expected output.
type Case struct {
	Pos      string // file:line of the command
	Line     string // the command line, verbatim
	Cmd      string // the first word of Line
	Args     []Arg  // the other words, in order
	Expected string // the lines between ---- and the next blank line
}

// Arg is one word after the command: key=val, or key alone (Val "").
type Arg struct{ Key, Val string }

// Args is a case's arguments by key; of a repeated key the last counts.
// Values are as written, except that Str and Ptr read %20 as a space
// (Parse splits arguments at spaces).
type Args map[string]string

// Map returns c's arguments by key.
func (c *Case) Map() Args {
	a := make(Args, len(c.Args))
	for _, kv := range c.Args {
		a[kv.Key] = kv.Val
	}
	return a
}

// Has reports whether k was given.
func (a Args) Has(k string) bool { _, ok := a[k]; return ok }

// Str is the value of k, def if absent.
func (a Args) Str(k, def string) string {
	if v, ok := a[k]; ok {
		return strings.ReplaceAll(v, "%20", " ")
	}
	return def
}

// Ptr is the value of k, nil if absent.
func (a Args) Ptr(k string) *string {
	if v, ok := a[k]; ok {
		v = strings.ReplaceAll(v, "%20", " ")
		return &v
	}
	return nil
}

// Num is the value of k as a decimal integer, def if absent. It panics on
// anything else: the test file is wrong.
func (a Args) Num(k string, def int64) int64 {
	v, ok := a[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", k, v, err))
	}
	return n
}

// ErrName is how the test files write a Kafka error code: NONE for 0,
// otherwise kerr's name for it (UNKNOWN_MEMBER_ID).
func ErrName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return strconv.Itoa(int(code))
}

// Chunk is a piece of a file: a Case, or (Case nil) one line of verbatim
// text, a comment or a blank, that a rewrite keeps.
type Chunk struct {
	Text string
	Case *Case
}

// Parse reads the file at path into its chunks, in order. A command not
// followed by ---- fails the test.
func Parse(t testing.TB, path string) []Chunk {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var chunks []Chunk
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			chunks = append(chunks, Chunk{Text: line})
			continue
		}
		c := &Case{Pos: fmt.Sprintf("%s:%d", path, i+1), Line: line}
		fields := strings.Fields(line)
		c.Cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			c.Args = append(c.Args, Arg{k, v})
		}
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("%s: want ---- after the command", c.Pos)
		}
		var out []string
		for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
			i++
			out = append(out, lines[i])
		}
		c.Expected = strings.Join(out, "\n")
		chunks = append(chunks, Chunk{Case: c})
	}
	return chunks
}

// Run runs every case of the file at path through do, in order, and
// compares do's output (trailing newlines dropped, "" written "ok") with
// the expected one; with -rewrite it writes the file again with the
// outputs instead.
func Run(t testing.TB, path string, do func(c *Case) string) {
	t.Helper()
	chunks := Parse(t, path)
	var b strings.Builder
	for _, ch := range chunks {
		if ch.Case == nil {
			b.WriteString(ch.Text + "\n")
			continue
		}
		c := ch.Case
		got := strings.TrimRight(do(c), "\n")
		if got == "" {
			got = "ok"
		}
		if !*rewrite && got != c.Expected {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", c.Pos, c.Cmd, got, c.Expected)
		}
		b.WriteString(c.Line + "\n----\n" + got + "\n")
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// RunDir runs every dir/*.txt file as a subtest named after the file, each
// through the handler newDo makes for that subtest (a fresh state machine
// per file). A dir without files fails the test.
func RunDir(t *testing.T, dir string, newDo func(t *testing.T) func(c *Case) string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			Run(t, f, newDo(t))
		})
	}
}
