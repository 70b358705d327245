package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// AllResult is the outcome of -all: every figure with its target, and the
// machine it was measured on. It is what -json-out writes and -compare
// reads; fields are only ever added, so older files still compare.
type AllResult struct {
	Command  string         `json:"command"`
	Settings map[string]any `json:"settings"`
	Machine  *Machine       `json:"machine"`
	Started  time.Time      `json:"started"`
	Seconds  float64        `json:"seconds"` // wall time of the whole run
	Figures  []*Figure      `json:"figures"`
	Errors   []string       `json:"errors,omitempty"`
	Aborted  string         `json:"aborted,omitempty"`
}

// Figure is one row of the -all table. Fjord and Kfake are medians of
// their samples (nil: not measured). The reference is Kfake unless Versus
// names another figure (whose fjord value then is the reference and shows
// in the kfake column's place as "-"). Ratio is Fjord over the reference:
// when the samples carry their rounds, the median of the per-round ratios
// (RoundRatios), else the ratio of the two medians. Met is nil when the
// figure has no target or could not be evaluated.
//
// Invariant: FjordRounds, when set, has one entry per FjordSamples entry
// (the 1-based round it was taken in); the same for KfakeRounds.
type Figure struct {
	ID           string    `json:"id"`      // stable key, for -compare
	Section      string    `json:"section"` // the group it is printed in: what runs, where
	Name         string    `json:"name"`
	Unit         string    `json:"unit"`
	Versus       string    `json:"versus,omitempty"` // ID of the reference figure, if not kfake
	Fjord        *float64  `json:"fjord,omitempty"`
	Kfake        *float64  `json:"kfake,omitempty"`
	Ratio        *float64  `json:"ratio,omitempty"`
	Target       *Target   `json:"target,omitempty"`
	Met          *bool     `json:"met,omitempty"`
	FjordSamples []float64 `json:"fjord_samples,omitempty"`
	KfakeSamples []float64 `json:"kfake_samples,omitempty"`
	FjordRounds  []int     `json:"fjord_rounds,omitempty"`
	KfakeRounds  []int     `json:"kfake_rounds,omitempty"`
	// RoundRatios are fjord over the reference in each round that measured
	// both, in round order. A round runs both brokers one after the other,
	// so a drift in the machine between rounds hits both sides of its
	// ratio; the ratio of two column medians can pair a fast round's
	// fjord with a slow round's kfake.
	RoundRatios    []float64 `json:"round_ratios,omitempty"`
	RatioOfMedians *float64  `json:"ratio_of_medians,omitempty"`
	Note           string    `json:"note,omitempty"`
}

// Target is a figure's goal. On "ratio" it bounds Figure.Ratio (fjord as
// a multiple of the reference); on "value" it bounds Figure.Fjord itself.
type Target struct {
	Of    string  `json:"of"` // "ratio" or "value"
	Op    string  `json:"op"` // ">=", "<=", "<"
	Value float64 `json:"value"`
}

func ratioAtLeast(v float64) *Target { return &Target{Of: "ratio", Op: ">=", Value: v} }
func ratioAtMost(v float64) *Target  { return &Target{Of: "ratio", Op: "<=", Value: v} }
func below(v float64) *Target        { return &Target{Of: "value", Op: "<", Value: v} }
func atMost(v float64) *Target       { return &Target{Of: "value", Op: "<=", Value: v} }

func (t *Target) String() string {
	if t == nil {
		return "-"
	}
	op := map[string]string{">=": "≥", "<=": "≤", "<": "<"}[t.Op]
	if t.Of == "ratio" {
		return fmt.Sprintf("%s %s×", op, trimFloat(t.Value))
	}
	return fmt.Sprintf("%s %s", op, trimFloat(t.Value))
}

// label is the figure's name with its unit.
func (f *Figure) label() string {
	if f.Unit == "" {
		return f.Name
	}
	return f.Name + ", " + f.Unit
}

// targetString is the target with the figure's unit when it bounds the
// value itself: "< 2 ms", "≥ 1×".
func (f *Figure) targetString() string {
	s := f.Target.String()
	if f.Target != nil && f.Target.Of == "value" && f.Unit != "" {
		s += " " + f.Unit
	}
	return s
}

// check reports whether v meets the target.
func (t *Target) check(v float64) bool {
	switch t.Op {
	case ">=":
		return v >= t.Value
	case "<=":
		return v <= t.Value
	case "<":
		return v < t.Value
	}
	return false
}

// evaluate fills Fjord and Kfake from the samples (medians), Ratio against
// the reference (ref: the kfake median, or another figure's fjord median;
// refByRound: the reference's value in each round, nil when its samples
// carry no rounds), and Met from the target.
func (f *Figure) evaluate(ref *float64, refByRound map[int]float64) {
	f.Fjord, f.Kfake = median(f.FjordSamples), median(f.KfakeSamples)
	f.Ratio, f.Met, f.RatioOfMedians, f.RoundRatios = nil, nil, nil, nil
	if f.Fjord != nil && ref != nil && *ref != 0 {
		r := *f.Fjord / *ref
		f.Ratio, f.RatioOfMedians = &r, &r
	}
	if own := byRound(f.FjordSamples, f.FjordRounds); own != nil && refByRound != nil {
		for _, round := range slices.Sorted(maps.Keys(own)) {
			if r, ok := refByRound[round]; ok && r != 0 {
				f.RoundRatios = append(f.RoundRatios, own[round]/r)
			}
		}
		if len(f.RoundRatios) > 0 {
			f.Ratio = median(f.RoundRatios)
		}
	}
	if f.Target == nil {
		return
	}
	subject := f.Fjord
	if f.Target.Of == "ratio" {
		subject = f.Ratio
	}
	if subject != nil {
		m := f.Target.check(*subject)
		f.Met = &m
	}
}

// median of the samples; nil for none. An even count averages the middle
// two.
func median(v []float64) *float64 {
	if len(v) == 0 {
		return nil
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + m) / 2
	}
	return &m
}

// byRound is the median of each round's samples, by round; nil when the
// samples carry no rounds (or not one per sample, which breaks the
// invariant: better no pairing than a wrong one).
func byRound(samples []float64, rounds []int) map[int]float64 {
	if len(rounds) == 0 || len(rounds) != len(samples) {
		return nil
	}
	in := map[int][]float64{}
	for i, r := range rounds {
		in[r] = append(in[r], samples[i])
	}
	out := make(map[int]float64, len(in))
	for r, v := range in {
		out[r] = *median(v)
	}
	return out
}

// evaluateAll evaluates every figure, each against kfake or its Versus.
func evaluateAll(figs []*Figure) {
	byID := map[string]*Figure{}
	for _, f := range figs {
		byID[f.ID] = f
	}
	// Figures without Versus first: they are the references of the rest.
	for _, pass := range []bool{false, true} {
		for _, f := range figs {
			if (f.Versus != "") != pass {
				continue
			}
			if f.Versus == "" {
				f.evaluate(median(f.KfakeSamples), byRound(f.KfakeSamples, f.KfakeRounds))
				continue
			}
			var ref *float64
			var refByRound map[int]float64
			if b := byID[f.Versus]; b != nil {
				ref, refByRound = b.Fjord, byRound(b.FjordSamples, b.FjordRounds)
			}
			f.evaluate(ref, refByRound)
		}
	}
}

// trimFloat prints v without trailing zeros: 1.5, 2, 0.5.
func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// fmtValue prints a figure's value with the precision its size needs.
func fmtValue(v *float64) string {
	if v == nil {
		return "-"
	}
	a := math.Abs(*v)
	switch {
	case a >= 1000:
		return fmt.Sprintf("%.0f", *v)
	case a >= 10:
		return fmt.Sprintf("%.1f", *v)
	case a >= 0.1 || a == 0:
		return fmt.Sprintf("%.3f", *v)
	}
	return fmt.Sprintf("%.4f", *v)
}

func fmtRatio(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}

func fmtMet(m *bool) string {
	switch {
	case m == nil:
		return "-"
	case *m:
		return "yes"
	}
	return "NO"
}

// fmtRoundRange prints the spread of a figure's per-round ratios, "lo-hi";
// "" for fewer than two rounds.
func fmtRoundRange(v []float64) string {
	if len(v) < 2 {
		return ""
	}
	return fmt.Sprintf("%.2f-%.2f", slices.Min(v), slices.Max(v))
}

// printFigures prints the table of -all: figure | fjord | kfake | ratio |
// per round | target | met?, one section title before each group of
// figures.
func printFigures(w io.Writer, figs []*Figure) {
	rows := [][]string{{"figure", "fjord", "kfake", "ratio", "per round", "target", "met?"}}
	section, paired := "", false
	for _, f := range figs {
		if f.Section != section {
			section = f.Section
			rows = append(rows, []string{section})
		}
		rr := fmtRoundRange(f.RoundRatios)
		paired = paired || rr != ""
		rows = append(rows, []string{"  " + f.label(), fmtValue(f.Fjord), fmtValue(f.Kfake), fmtRatio(f.Ratio), rr, f.targetString(), fmtMet(f.Met)})
	}
	renderTable(w, rows)
	if paired {
		fmt.Fprintln(w, "\nfjord and kfake are medians over the rounds; a ratio with a per-round range is the median of the per-round ratios (each round measures both sides, one after the other), the range their lowest and highest")
	}
	first := true
	for _, f := range figs {
		if f.Note == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nnotes:")
			first = false
		}
		fmt.Fprintf(w, "  %s: %s\n", f.ID, f.Note)
	}
}

// printMachine prints the machine record as the header of a run.
func printMachine(w io.Writer, m *Machine) {
	fmt.Fprintf(w, "machine:  %s, %d CPUs, %.0f MiB RAM, kernel %s, %s\n", m.CPUModel, m.CPUs, m.MemTotalMiB, m.Kernel, m.Platform)
	fmt.Fprintf(w, "data dir: %s (%s)\n", m.DataDir, m.DataFSType)
	if m.PageTouchUs > 0 {
		fmt.Fprintf(w, "memory:   a fresh page takes %.2f µs to fault in (anonymous, 4 KiB pages, median of %d × %d MiB)\n", m.PageTouchUs, pageTouchRuns, pageTouchSize>>20)
	}
	fmt.Fprintf(w, "build:    bench %s; fjord %s; commit %s; label %s\n", m.GoVersion, orDash(m.FjordBuild), orDash(m.Commit), orDash(m.Label))
	fmt.Fprintf(w, "load:     %s at start", orDash(m.LoadStart))
	if m.LoadEnd != "" {
		fmt.Fprintf(w, ", %s at end", m.LoadEnd)
	}
	if m.Waited >= 1 {
		fmt.Fprintf(w, " (waited %.0f s for it to fall)", m.Waited)
	}
	fmt.Fprintln(w)
	if m.Busy {
		fmt.Fprintf(w, "BUSY:     %s\n", busyNote(m))
	}
}

// busyNote says why a busy run's figures are not a quiet machine's.
func busyNote(m *Machine) string {
	return fmt.Sprintf("the 1-minute load average was above %.1f at the start (%s): something else shared the machine, so these are not a quiet machine's figures", quietLoad, orDash(m.LoadStart))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing -json-out: %w", err)
	}
	return nil
}

func readAllResult(path string) (*AllResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r AllResult
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(r.Figures) == 0 {
		return nil, fmt.Errorf("%s: no figures (not a -all -json-out result?)", path)
	}
	return &r, nil
}

func runCompare(a, b string, w io.Writer) int {
	ra, err := readAllResult(a)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fjord-bench:", err)
		return 1
	}
	rb, err := readAllResult(b)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fjord-bench:", err)
		return 1
	}
	printCompare(w, ra, rb, a, b)
	return 0
}

// printCompare prints b against a figure by figure: both fjord values,
// the relative change, kfake's relative change (how much the machine
// drifted between the runs), both ratios, and whether the target was met in
// each. Figures only one side has are listed with "-" for the other.
// Whether a change is better depends on the figure (records/s up, ms
// down), so the table gives the sign only; the target column says which
// way is good.
func printCompare(w io.Writer, a, b *AllResult, nameA, nameB string) {
	desc := func(tag, name string, r *AllResult) {
		m := r.Machine
		if m == nil {
			m = &Machine{}
		}
		busy := ""
		if m.Busy {
			busy = " (BUSY: not a quiet machine)"
		}
		fmt.Fprintf(w, "%s: %s: %s, started %s, load %s → %s%s\n", tag, name, orDash(m.Label), r.Started.Format(time.RFC3339), orDash(m.LoadStart), orDash(m.LoadEnd), busy)
	}
	desc("A", nameA, a)
	desc("B", nameB, b)
	if ma, mb := a.Machine, b.Machine; ma != nil && mb != nil {
		if ma.CPUModel != mb.CPUModel || ma.CPUs != mb.CPUs || ma.Kernel != mb.Kernel || ma.DataFSType != mb.DataFSType {
			fmt.Fprintf(w, "note: different machines: %s ×%d %s %s vs %s ×%d %s %s\n",
				ma.CPUModel, ma.CPUs, ma.Kernel, ma.DataFSType, mb.CPUModel, mb.CPUs, mb.Kernel, mb.DataFSType)
		}
		if lo, hi := min(ma.PageTouchUs, mb.PageTouchUs), max(ma.PageTouchUs, mb.PageTouchUs); lo > 0 && hi > 2*lo {
			fmt.Fprintf(w, "note: different memory: a fresh page took %.2f µs to fault in on A, %.2f µs on B\n", ma.PageTouchUs, mb.PageTouchUs)
		}
	}
	fmt.Fprintln(w)
	byID := map[string]*Figure{}
	for _, f := range b.Figures {
		byID[f.ID] = f
	}
	var order []*Figure
	seen := map[string]bool{}
	for _, f := range a.Figures {
		order = append(order, f)
		seen[f.ID] = true
	}
	for _, f := range b.Figures {
		if !seen[f.ID] {
			order = append(order, f)
		}
	}
	inA := map[string]*Figure{}
	for _, f := range a.Figures {
		inA[f.ID] = f
	}
	rows := [][]string{{"figure", "A fjord", "B fjord", "change", "kfake change", "A ratio", "B ratio", "target", "met A → B"}}
	section := ""
	for _, f := range order {
		if f.Section != section {
			section = f.Section
			rows = append(rows, []string{section})
		}
		fa, fb := inA[f.ID], byID[f.ID]
		var va, vb, ka, kb, ratA, ratB *float64
		var metA, metB *bool
		if fa != nil {
			va, ka, ratA, metA = fa.Fjord, fa.Kfake, fa.Ratio, fa.Met
		}
		if fb != nil {
			vb, kb, ratB, metB = fb.Fjord, fb.Kfake, fb.Ratio, fb.Met
		}
		rows = append(rows, []string{"  " + f.label(), fmtValue(va), fmtValue(vb), fmtChange(va, vb), fmtChange(ka, kb), fmtRatio(ratA), fmtRatio(ratB), f.targetString(), fmtMet(metA) + " → " + fmtMet(metB)})
	}
	renderTable(w, rows)
}

// fmtChange is (b-a)/a as a signed percentage.
func fmtChange(a, b *float64) string {
	if a == nil || b == nil || *a == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", (*b-*a) / *a * 100)
}
