package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func fp(v float64) *float64 { return &v }

func TestTargetCheck(t *testing.T) {
	cases := []struct {
		t    *Target
		v    float64
		want bool
	}{
		{ratioAtLeast(1), 1, true},
		{ratioAtLeast(1), 0.999, false},
		{ratioAtMost(1.5), 1.5, true},
		{ratioAtMost(1.5), 1.51, false},
		{below(2), 1.99, true},
		{below(2), 2, false},
		{atMost(2), 2, true},
		{&Target{Of: "value", Op: "??", Value: 1}, 1, false},
	}
	for _, c := range cases {
		if got := c.t.check(c.v); got != c.want {
			t.Errorf("%s %s check(%g) = %v, want %v", c.t.Of, c.t, c.v, got, c.want)
		}
	}
}

func TestTargetString(t *testing.T) {
	for _, c := range []struct {
		f    *Figure
		want string
	}{
		{&Figure{Target: ratioAtLeast(1)}, "≥ 1×"},
		{&Figure{Target: ratioAtMost(1.5), Unit: "ms"}, "≤ 1.5×"},
		{&Figure{Target: below(2), Unit: "ms"}, "< 2 ms"},
		{&Figure{Target: below(1024), Unit: "MiB"}, "< 1024 MiB"},
		{&Figure{}, "-"},
	} {
		if got := c.f.targetString(); got != c.want {
			t.Errorf("targetString = %q, want %q", got, c.want)
		}
	}
}

func TestMedian(t *testing.T) {
	if median(nil) != nil {
		t.Fatal("median of nothing is not nil")
	}
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := append([]float64(nil), c.in...)
		if got := *median(in); got != c.want {
			t.Errorf("median(%v) = %g, want %g", c.in, got, c.want)
		}
		if !reflect.DeepEqual(in, c.in) {
			t.Errorf("median reordered its input: %v", in)
		}
	}
}

func TestEvaluate(t *testing.T) {
	figs := []*Figure{
		// Versus first, to check that references are evaluated before.
		{ID: "wide", Versus: "base", FjordSamples: []float64{40}, Target: ratioAtLeast(0.5)},
		{ID: "base", FjordSamples: []float64{100, 90, 80}, KfakeSamples: []float64{100}, Target: ratioAtLeast(1)},
		{ID: "p99", FjordSamples: []float64{3}, KfakeSamples: []float64{2}, Target: ratioAtMost(1.5)},
		{ID: "e2e", FjordSamples: []float64{1.5}, KfakeSamples: []float64{0.5}, Target: below(2)},
		{ID: "info", FjordSamples: []float64{7}, KfakeSamples: []float64{0}},
		{ID: "alone", FjordSamples: []float64{9}, Target: ratioAtLeast(1)},
		{ID: "none", Target: below(1)},
	}
	evaluateAll(figs)
	want := map[string]struct {
		fjord, kfake, ratio *float64
		met                 *bool
	}{
		"wide":  {fp(40), nil, fp(40.0 / 90), ptrBool(false)},
		"base":  {fp(90), fp(100), fp(0.9), ptrBool(false)},
		"p99":   {fp(3), fp(2), fp(1.5), ptrBool(true)},
		"e2e":   {fp(1.5), fp(0.5), fp(3), ptrBool(true)},
		"info":  {fp(7), fp(0), nil, nil}, // no ratio to a zero, no target
		"alone": {fp(9), nil, nil, nil},   // a ratio target without a reference is not evaluated
		"none":  {nil, nil, nil, nil},
	}
	for _, f := range figs {
		w := want[f.ID]
		if !eqF(f.Fjord, w.fjord) || !eqF(f.Kfake, w.kfake) || !eqF(f.Ratio, w.ratio) || !eqB(f.Met, w.met) {
			t.Errorf("%s: fjord %s kfake %s ratio %s met %s; want %s %s %s %s", f.ID,
				fmtValue(f.Fjord), fmtValue(f.Kfake), fmtRatio(f.Ratio), fmtMet(f.Met),
				fmtValue(w.fjord), fmtValue(w.kfake), fmtRatio(w.ratio), fmtMet(w.met))
		}
	}
}

func ptrBool(b bool) *bool { return &b }

func eqF(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	d := *a - *b
	return d < 1e-9 && d > -1e-9
}

func eqB(a, b *bool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func TestFmtValue(t *testing.T) {
	for _, c := range []struct {
		v    *float64
		want string
	}{{nil, "-"}, {fp(158345.6), "158346"}, {fp(12.34), "12.3"}, {fp(1.8523), "1.852"}, {fp(0.0108), "0.0108"}, {fp(0), "0.000"}} {
		if got := fmtValue(c.v); got != c.want {
			t.Errorf("fmtValue(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func sampleResult(label string, produce, p99 float64) *AllResult {
	figs := []*Figure{
		{ID: "produce_rps_l0", Name: "produce linger 0", Unit: "records/s", FjordSamples: []float64{produce}, KfakeSamples: []float64{100000}, Target: ratioAtLeast(1)},
		{ID: "ack_p99_l0", Name: "produce→ack p99", Unit: "ms", FjordSamples: []float64{p99}, KfakeSamples: []float64{1}, Target: ratioAtMost(1.5)},
	}
	evaluateAll(figs)
	return &AllResult{
		Command:  "fjord-bench -all",
		Settings: map[string]any{"records": float64(200000)},
		Machine:  &Machine{CPUModel: "Test CPU", CPUs: 2, Kernel: "6.1", DataFSType: "ext2/3/4", Label: label, LoadStart: "0.10 0.20 0.30", LoadEnd: "1.00 0.50 0.40"},
		Started:  time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC),
		Seconds:  600,
		Figures:  figs,
	}
}

func TestJSONRoundTrip(t *testing.T) {
	r := sampleResult("abc1234", 120000, 1.2)
	path := filepath.Join(t.TempDir(), "r.json")
	if err := writeJSONFile(path, r); err != nil {
		t.Fatal(err)
	}
	got, err := readAllResult(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		a, _ := json.Marshal(r)
		b, _ := json.Marshal(got)
		t.Fatalf("round trip changed the result:\n%s\n%s", a, b)
	}
}

func TestReadAllResultRejectsOtherJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "suites.json")
	os.WriteFile(path, []byte(`{"command":"fjord-bench -kfake","targets":[]}`), 0o644)
	if _, err := readAllResult(path); err == nil || !strings.Contains(err.Error(), "no figures") {
		t.Fatalf("err = %v, want a 'no figures' error", err)
	}
}

func TestCompare(t *testing.T) {
	a := sampleResult("aaaaaaa", 100000, 2)
	b := sampleResult("bbbbbbb", 125000, 1)
	// A figure only B has, and a different machine.
	b.Figures = append(b.Figures, &Figure{ID: "new", Section: "later", Name: "new figure", Unit: "s", Fjord: fp(3)})
	b.Machine.CPUs = 4
	b.Machine.Busy = true
	a.Machine.PageTouchUs, b.Machine.PageTouchUs = 0.5, 11.5
	var out bytes.Buffer
	printCompare(&out, a, b, "a.json", "b.json")
	s := out.String()
	for _, want := range []string{
		"A: a.json: aaaaaaa",
		"B: b.json: bbbbbbb",
		"note: different machines",
		"note: different memory: a fresh page took 0.50 µs to fault in on A, 11.50 µs on B",
		"bbbbbbb, started 2026-12-02T04:00:00Z, load 0.10 0.20 0.30 → 1.00 0.50 0.40 (BUSY: not a quiet machine)",
		"+25.0%", // produce 100000 → 125000
		"-50.0%", // p99 2 → 1
		"yes → yes",
		"NO → yes", // p99 ratio 2 → 1 against ≤ 1.5
		"new figure, s",
		"\nlater\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("compare output lacks %q:\n%s", want, s)
		}
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "  new figure") || !strings.Contains(last, "- → -") {
		t.Errorf("a figure only B has should come last with no A value: %q", last)
	}
}

func TestPrintFigures(t *testing.T) {
	r := sampleResult("x", 90000, 1.2)
	r.Figures[0].Note = "a note"
	var out bytes.Buffer
	r.Figures[0].Section, r.Figures[1].Section = "section one", "section one"
	printFigures(&out, r.Figures)
	if n := strings.Count(out.String(), "section one"); n != 1 {
		t.Errorf("section title printed %d times, want once", n)
	}
	s := out.String()
	for _, want := range []string{"figure", "met?", "section one", "produce linger 0, records/s", "90000", "100000", "0.90", "≥ 1×", "NO", "yes", "notes:", "produce_rps_l0: a note"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
}

// TestEvaluatePaired checks that a figure whose samples carry their rounds
// gets the median of its per-round ratios, paired only within a round.
func TestEvaluatePaired(t *testing.T) {
	figs := []*Figure{
		// Ratio of medians 100/100 = 1; per round 100/110, 80/60, 120/100.
		{ID: "base", FjordSamples: []float64{100, 80, 120}, FjordRounds: []int{1, 2, 3},
			KfakeSamples: []float64{110, 60, 100}, KfakeRounds: []int{1, 2, 3}, Target: ratioAtLeast(1.1)},
		// Round 2 has no fjord sample: rounds 1 and 3 pair, 50/100 and 150/100.
		{ID: "gap", FjordSamples: []float64{50, 150}, FjordRounds: []int{1, 3},
			KfakeSamples: []float64{100, 10, 100}, KfakeRounds: []int{1, 2, 3}},
		// Against another figure's fjord samples, round by round: 40/100, 48/80, 50/120.
		{ID: "wide", Versus: "base", FjordSamples: []float64{40, 48, 50}, FjordRounds: []int{1, 2, 3}},
		// Two samples in round 1: their median (2) is the round's value.
		{ID: "twice", FjordSamples: []float64{1, 3}, FjordRounds: []int{1, 1},
			KfakeSamples: []float64{2}, KfakeRounds: []int{1}},
		// Rounds that do not match the samples one to one are not paired.
		{ID: "broken", FjordSamples: []float64{10, 30}, FjordRounds: []int{1},
			KfakeSamples: []float64{10, 20}, KfakeRounds: []int{1, 2}},
	}
	evaluateAll(figs)
	want := map[string]struct {
		ratio, ofMedians float64
		rounds           []float64
		met              *bool
	}{
		"base":   {1.2, 1, []float64{100.0 / 110, 80.0 / 60, 1.2}, ptrBool(true)},
		"gap":    {1, 1, []float64{0.5, 1.5}, nil},
		"wide":   {50.0 / 120, 0.48, []float64{0.4, 0.6, 50.0 / 120}, nil},
		"twice":  {1, 1, []float64{1}, nil},
		"broken": {20.0 / 15, 20.0 / 15, nil, nil},
	}
	for _, f := range figs {
		w := want[f.ID]
		if !eqF(f.Ratio, fp(w.ratio)) || !eqF(f.RatioOfMedians, fp(w.ofMedians)) || !eqB(f.Met, w.met) {
			t.Errorf("%s: ratio %s of medians %s met %s; want %.3f %.3f %s", f.ID,
				fmtRatio(f.Ratio), fmtRatio(f.RatioOfMedians), fmtMet(f.Met), w.ratio, w.ofMedians, fmtMet(w.met))
		}
		if len(f.RoundRatios) != len(w.rounds) {
			t.Errorf("%s: round ratios %v, want %v", f.ID, f.RoundRatios, w.rounds)
			continue
		}
		for i := range w.rounds {
			if !eqF(&f.RoundRatios[i], &w.rounds[i]) {
				t.Errorf("%s: round ratios %v, want %v", f.ID, f.RoundRatios, w.rounds)
				break
			}
		}
	}

	var out bytes.Buffer
	printFigures(&out, figs)
	for _, want := range []string{"per round", "0.91-1.33", "1.20", "median of the per-round ratios"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestFigureSetRounds checks that samples put during a round carry it.
func TestFigureSetRounds(t *testing.T) {
	s := newFigureSet(&config{partitions: 6, manyPartitions: 1000, rate: 3500, duration: time.Second})
	s.fjord("produce_rps_l0", 1) // before any round: no round recorded
	f := s.byID["produce_rps_l0"]
	if f.FjordRounds != nil {
		t.Fatalf("a sample outside a round got rounds %v", f.FjordRounds)
	}
	f.FjordSamples = nil
	for round := 1; round <= 2; round++ {
		s.round = round
		s.put("fjord", "produce_rps_l0", float64(round))
		s.put("kfake", "produce_rps_l0", 2)
	}
	if !reflect.DeepEqual(f.FjordRounds, []int{1, 2}) || !reflect.DeepEqual(f.KfakeRounds, []int{1, 2}) {
		t.Errorf("rounds fjord %v kfake %v, want [1 2] each", f.FjordRounds, f.KfakeRounds)
	}
}
