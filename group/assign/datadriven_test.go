package assign

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A small datadriven runner in the cockroachdb/datadriven format. A file is
// a sequence of cases separated by blank lines or # comments:
//
//	assign uniform
//	topics a:3 b:2
//	m1 sub=a,b cur=a:0,1;b:0
//	m2 sub=a inst=i2 rack=r1
//	----
//	m1: a:0,1 b:0
//	m2: a:2
//	moved=1
//
// The lines between the command and ---- describe the Spec: one topics
// line (name:partitions; a topic's id is its name's bytes, so id order is
// name order) and one line per member. The output lists every member of
// the Assignment in id order, topics by name, then moved: how many
// (member, partition) pairs the assignment has that the member's Current
// did not.
//
// go test ./group/assign -run TestDataDriven -rewrite regenerates the
// expected output; review the diff.

var rewrite = flag.Bool("rewrite", false, "rewrite testdata expected output")

func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runDD(t, f) })
	}
}

func runDD(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		pos := fmt.Sprintf("%s:%d", path, i+1)
		cmd := line
		var input []string
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			input = append(input, lines[i])
		}
		if i >= len(lines) {
			t.Fatalf("%s: no ---- after the command", pos)
		}
		var want []string
		for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
			i++
			want = append(want, lines[i])
		}
		got := strings.TrimRight(doDD(t, pos, cmd, input), "\n")
		if !*rewrite && got != strings.Join(want, "\n") {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", pos, cmd, got, strings.Join(want, "\n"))
		}
		out.WriteString(cmd + "\n")
		for _, l := range input {
			out.WriteString(l + "\n")
		}
		out.WriteString("----\n" + got + "\n")
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func doDD(t *testing.T, pos, cmd string, input []string) string {
	fields := strings.Fields(cmd)
	if len(fields) != 2 || fields[0] != "assign" {
		t.Fatalf("%s: want \"assign <assignor>\", got %q", pos, cmd)
	}
	a, ok := ByName(fields[1])
	if !ok {
		t.Fatalf("%s: no assignor %q", pos, fields[1])
	}
	s := parseSpec(t, pos, input)
	before := cloneSpec(s)
	got := a.Assign(s)
	if err := checkShape(s, got); err != nil {
		t.Errorf("%s: %v", pos, err)
	}
	if !specEqual(before, s) {
		t.Errorf("%s: Assign modified its Spec", pos)
	}
	return formatAssignment(s, got)
}

// tid makes a topic id whose byte order is name order.
func tid(name string) TopicID {
	var id TopicID
	if len(name) > len(id) {
		panic("topic name too long: " + name)
	}
	copy(id[:], name)
	return id
}

func tname(id TopicID) string { return string(bytes.TrimRight(id[:], "\x00")) }

func parseSpec(t *testing.T, pos string, input []string) Spec {
	var s Spec
	for _, line := range input {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if fields[0] == "topics" {
			for _, f := range fields[1:] {
				name, n, ok := strings.Cut(f, ":")
				p, err := strconv.Atoi(n)
				if !ok || err != nil {
					t.Fatalf("%s: bad topic %q", pos, f)
				}
				s.Topics = append(s.Topics, Topic{ID: tid(name), Name: name, Partitions: int32(p)})
			}
			continue
		}
		m := Member{ID: fields[0]}
		for _, f := range fields[1:] {
			k, val, _ := strings.Cut(f, "=")
			switch k {
			case "sub":
				for _, name := range strings.Split(val, ",") {
					m.Subscribed = append(m.Subscribed, tid(name))
				}
			case "cur":
				m.Current = parseParts(t, pos, val)
			case "inst":
				m.InstanceID = &val
			case "rack":
				m.Rack = &val
			default:
				t.Fatalf("%s: unknown member field %q", pos, k)
			}
		}
		slices.SortFunc(m.Subscribed, func(a, b TopicID) int { return bytes.Compare(a[:], b[:]) })
		s.Members = append(s.Members, m)
	}
	slices.SortFunc(s.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(s.Topics, func(a, b Topic) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return s
}

// parseParts reads "a:0,1;b:3-5" (ranges inclusive).
func parseParts(t *testing.T, pos, val string) map[TopicID][]int32 {
	out := make(map[TopicID][]int32)
	for _, tp := range strings.Split(val, ";") {
		name, list, ok := strings.Cut(tp, ":")
		if !ok {
			t.Fatalf("%s: bad partitions %q", pos, tp)
		}
		var ps []int32
		for _, item := range strings.Split(list, ",") {
			lo, hi, isRange := strings.Cut(item, "-")
			l, err1 := strconv.Atoi(lo)
			h, err2 := l, error(nil)
			if isRange {
				h, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: bad partition %q", pos, item)
			}
			for p := l; p <= h; p++ {
				ps = append(ps, int32(p))
			}
		}
		slices.Sort(ps)
		out[tid(name)] = ps
	}
	return out
}

func formatAssignment(s Spec, a Assignment) string {
	var b strings.Builder
	moved := 0
	for _, m := range s.Members {
		fmt.Fprintf(&b, "%s:", m.ID)
		got := a[m.ID]
		ids := sortedTopics(got)
		if len(ids) == 0 {
			b.WriteString(" -")
		}
		for _, id := range ids {
			ps := got[id]
			strs := make([]string, len(ps))
			for i, p := range ps {
				strs[i] = strconv.Itoa(int(p))
				if !slices.Contains(m.Current[id], p) {
					moved++
				}
			}
			fmt.Fprintf(&b, " %s:%s", tname(id), strings.Join(strs, ","))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "moved=%d", moved)
	return b.String()
}

func sortedTopics(m map[TopicID][]int32) []TopicID {
	ids := make([]TopicID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b TopicID) int { return bytes.Compare(a[:], b[:]) })
	return ids
}
