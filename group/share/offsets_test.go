package share

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/internal/datadriven"
)

// TestOffsetsDataDriven runs testdata/offsets/*.txt: the harness's
// commands (harness_test.go) and those of the offsets administration
// (offsets.go), each followed by the same invariant and replay checks:
//
//	alter topic=p,p ...           AlterOffsets
//	mark topic=p,p ...            MarkInitialized
//	delete-offsets topic ...      DeleteOffsets
//	offsets-deleted topic ...     OffsetsDeleted
//	begin-delete                  BeginDelete
//
// Topics are named as in the image (a name the image lacks stands for the
// harness's id of that name, generation 0).
func TestOffsetsDataDriven(t *testing.T) {
	datadriven.RunDir(t, "testdata/offsets", func(t *testing.T) func(*datadriven.Case) string {
		h := newHarness(t)
		return func(c *datadriven.Case) string { return h.doOffsets(c) }
	})
}

func (h *harness) doOffsets(c *datadriven.Case) string {
	var b strings.Builder
	switch c.Cmd {
	case "alter":
		epoch, recs, err := h.g.AlterOffsets(h.img, h.partsArg(c))
		if err != nil {
			return h.refused(err)
		}
		fmt.Fprintf(&b, "state epoch %d\n", epoch)
		h.records(&b, recs)
	case "mark":
		h.records(&b, h.g.MarkInitialized(h.img, h.partsArg(c)))
	case "delete-offsets":
		parts, recs, err := h.g.DeleteOffsets(h.img, h.topicsArg(c))
		if err != nil {
			return h.refused(err)
		}
		b.WriteString("delete: " + h.formatAssignment(parts) + "\n")
		h.records(&b, recs)
	case "offsets-deleted":
		h.records(&b, h.g.OffsetsDeleted(h.topicsArg(c)))
	case "begin-delete":
		parts, recs, err := h.g.BeginDelete(h.img)
		if err != nil {
			return h.refused(err)
		}
		b.WriteString("delete: " + h.formatAssignment(parts) + "\n")
		h.records(&b, recs)
	default:
		return h.do(c)
	}
	h.check(c.Pos)
	fmt.Fprintf(&b, "> %s\n> initializing=[%s] initialized=[%s] deleting=[%s]", h.status(),
		formatSP(h.g.sp.initializing), formatSP(h.g.sp.initialized), formatSP(h.g.sp.deleting))
	return b.String()
}

// refused prints an error the way the harness prints Delete's, after
// checking that a refusal changed nothing.
func (h *harness) refused(err error) string {
	if len(h.g.out) > 0 {
		h.t.Fatalf("refused with %d records pending", len(h.g.out))
	}
	return "error: " + datadriven.ErrName(group.ErrorCode(err)) + " (" + err.Error() + ")"
}

func (h *harness) idOf(name string) TopicID {
	if t, ok := h.img.ByName(name); ok {
		return t.ID
	}
	return topicID(name, 0)
}

// partsArg reads topic=p,p ... words.
func (h *harness) partsArg(c *datadriven.Case) map[TopicID][]int32 {
	out := map[TopicID][]int32{}
	for _, kv := range c.Args {
		id := h.idOf(kv.Key)
		for _, s := range strings.Split(kv.Val, ",") {
			if s == "" {
				continue
			}
			p, err := strconv.Atoi(s)
			if err != nil {
				h.t.Fatalf("%s: partition %q: %v", c.Pos, s, err)
			}
			out[id] = append(out[id], int32(p))
		}
	}
	return out
}

// topicsArg reads topic words.
func (h *harness) topicsArg(c *datadriven.Case) []TopicID {
	var out []TopicID
	for _, kv := range c.Args {
		out = append(out, h.idOf(kv.Key))
	}
	return out
}
