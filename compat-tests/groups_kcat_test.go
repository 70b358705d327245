package compattests

import (
	"sort"
	"strings"
	"testing"
	"time"
)

// TestGroupKcat: kcat -G (librdkafka's balanced consumer) reads a topic to
// the end and commits on exit; a second run with the same group prints
// exactly the records produced in between.
func TestGroupKcat(t *testing.T) {
	kcat := kcatPath(t)
	const topic, group = "kcat-group", "kcat-grp"
	b := startBroker(t, t.TempDir(), groupBrokerOverrides...)
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, topic, 3, nil)
	prod := newClient(t, b.Addr)

	values := func(m map[recKey]string) []string {
		var out []string
		for _, v := range m {
			out = append(out, v)
		}
		sort.Strings(out)
		return out
	}
	// kcat -G applies -o to every assigned partition (its rebalance
	// callback sets the assignment's offsets to -o), which overrides the
	// committed offsets; so only the first run passes -o beginning, and the
	// second relies on the committed offsets, with auto.offset.reset=earliest
	// as the fallback that would re-print everything if none were found.
	consume := func(extra ...string) []string {
		args := append([]string{"-b", b.Addr, "-G", group, topic, "-e", "-q", "-f", `%s\n`,
			"-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100",
			"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
			"-X", "auto.offset.reset=earliest"}, extra...)
		out := runKcat(t, kcat, "", args...)
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if l != "" {
				got = append(got, l)
			}
		}
		sort.Strings(got)
		return got
	}
	compare := func(run string, got, want []string) {
		t.Helper()
		if strings.Join(got, "\n") == strings.Join(want, "\n") {
			return
		}
		wantSet := map[string]int{}
		for _, w := range want {
			wantSet[w]++
		}
		var extra []string
		for _, g := range got {
			if wantSet[g] == 0 {
				extra = append(extra, g)
				continue
			}
			wantSet[g]--
		}
		var missing []string
		for w, n := range wantSet {
			for ; n > 0; n-- {
				missing = append(missing, w)
			}
		}
		sort.Strings(missing)
		t.Errorf("%s: kcat -G printed %d records, want %d; %d missing (e.g. %v), %d unexpected or repeated (e.g. %v)",
			run, len(got), len(want), len(missing), missing[:min(5, len(missing))], len(extra), extra[:min(5, len(extra))])
	}

	first := produceAcked(t, prod, topic, "first", 300)
	start := time.Now()
	compare("first run", consume("-o", "beginning"), values(first))
	t.Logf("first kcat -G run took %v", time.Since(start))
	end := endOffsets(t, adm, topic)
	if com := committedOffsets(t, adm, group, topic); !sameOffsets(com, end) {
		t.Errorf("after the first run, committed offsets %s, end offsets %s", fmtOffsets(com), fmtOffsets(end))
	}

	second := produceAcked(t, prod, topic, "second", 150)
	start = time.Now()
	compare("second run (same group)", consume(), values(second))
	t.Logf("second kcat -G run took %v", time.Since(start))
	end = endOffsets(t, adm, topic)
	if com := committedOffsets(t, adm, group, topic); !sameOffsets(com, end) {
		t.Errorf("after the second run, committed offsets %s, end offsets %s", fmtOffsets(com), fmtOffsets(end))
	}
}
