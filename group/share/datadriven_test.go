package share

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A small datadriven runner in the style of cockroachdb/datadriven (which
// is not a dependency of this module). A file is a sequence of cases:
//
//	# comments and blank lines between cases are kept
//	command key=value ...
//	----
//	expected output, one or more lines, ending at a blank line
//
// go test ./group/share -run TestDataDriven -rewrite regenerates the expected
// output; review the diff.

var rewrite = flag.Bool("rewrite", false, "rewrite testdata expected output")

type ddCase struct {
	pos      string // file:line of the command
	line     string // the command line, verbatim
	cmd      string
	args     []ddArg
	expected string
}

type ddArg struct{ key, val string }

// ddChunk is a file piece: a case, or verbatim text (comments, blanks).
type ddChunk struct {
	text string
	c    *ddCase
}

func parseDD(t *testing.T, path string) []ddChunk {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var chunks []ddChunk
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			chunks = append(chunks, ddChunk{text: line})
			continue
		}
		c := &ddCase{pos: fmt.Sprintf("%s:%d", path, i+1), line: line}
		fields := strings.Fields(line)
		c.cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			c.args = append(c.args, ddArg{k, v})
		}
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("%s: want ---- after the command", c.pos)
		}
		var out []string
		for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
			i++
			out = append(out, lines[i])
		}
		c.expected = strings.Join(out, "\n")
		chunks = append(chunks, ddChunk{c: c})
	}
	return chunks
}

// runDD runs every case of path through do, comparing or rewriting.
func runDD(t *testing.T, path string, do func(c *ddCase) string) {
	chunks := parseDD(t, path)
	var b strings.Builder
	for _, ch := range chunks {
		if ch.c == nil {
			b.WriteString(ch.text + "\n")
			continue
		}
		c := ch.c
		got := strings.TrimRight(do(c), "\n")
		if got == "" {
			got = "ok"
		}
		if !*rewrite && got != c.expected {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", c.pos, c.cmd, got, c.expected)
		}
		b.WriteString(c.line + "\n----\n" + got + "\n")
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			h := newHarness(t)
			runDD(t, f, h.do)
		})
	}
}
