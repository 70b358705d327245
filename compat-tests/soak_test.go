package compattests

// TestSoak (`make soak DURATION=1h`): three fjord processes at RF 3 take an
// idempotent acks=all producer at 3,500 records/s and a consumer group for
// the whole duration while a fault lands every two minutes, drawn in turn
// from every class the real-process harness can inject: kill -9 of a
// leader, a leader frozen (SIGSTOP), a node cut off from the others, two
// of three nodes killed at once, a clean rolling restart of one node, and
// topics created and deleted beside the workload. Power cuts and sick
// disks need the in-process file systems of broker/brokertest, and
// namespaced networks need root: they have their own tests
// (TestPowerCut*, the sick-disk tests, TestNetworkFaults) and are not in
// this mix.
//
// Every 10 s each node's resident memory, open descriptors and goroutines
// (from its /metrics) are sampled, with the harness's own memory, into
// soak.csv; soak.png plots them. The histories are checked at the end as
// in every fault scenario (0 acknowledged records lost, the group's
// commits consistent), and for a run of 10 minutes or more nothing may
// grow without bound: the medians of the last fifth of the run must stay
// within a margin of those of the second fifth (soakGrowth).
//
// FJORD_SOAK is the duration (unset: skipped); FJORD_SOAK_FAULT_EVERY the
// fault period (default 2m); FJORD_SOAK_OUT the directory for soak.csv,
// soak-events.csv and soak.png (default: a directory the test logs).

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"image/color"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

const (
	soakRate           = 3500 // records per second
	soakSampleInterval = 10 * time.Second
)

// soakSample is one node's figures at one moment; a node that did not
// answer (killed, frozen) has ok false.
type soakSample struct {
	at         time.Duration // since the soak began
	node       int           // 0: the test harness itself
	ok         bool
	rssMiB     float64
	fds        float64
	goroutines float64
}

// soakRecorder holds the samples and fault events of a run.
type soakRecorder struct {
	mu      sync.Mutex
	start   time.Time
	samples []soakSample
	events  []soakEvent
}

type soakEvent struct {
	at   time.Duration
	what string
}

func (s *soakRecorder) event(what string) {
	s.mu.Lock()
	s.events = append(s.events, soakEvent{time.Since(s.start), what})
	s.mu.Unlock()
}

func TestSoak(t *testing.T) {
	v := os.Getenv("FJORD_SOAK")
	if v == "" {
		t.Skip("soak: set FJORD_SOAK to a duration (make soak DURATION=1h)")
	}
	total, err := time.ParseDuration(v)
	if err != nil || total <= 0 {
		t.Fatalf("FJORD_SOAK=%q: want a positive Go duration", v)
	}
	every := 2 * time.Minute
	if e := os.Getenv("FJORD_SOAK_FAULT_EVERY"); e != "" {
		if every, err = time.ParseDuration(e); err != nil || every < 20*time.Second {
			t.Fatalf("FJORD_SOAK_FAULT_EVERY=%q: want a duration of at least 20s", e)
		}
	}
	out := os.Getenv("FJORD_SOAK_OUT")
	if out == "" {
		out = t.TempDir()
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}

	begin := time.Now()
	fc := startFaultClusterOpts(t, 3, faultClusterOpts{metrics: true})
	rec := &soakRecorder{start: time.Now()}
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		rec.sample(fc)
		tk := time.NewTicker(soakSampleInterval)
		defer tk.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tk.C:
				rec.sample(fc)
			}
		}
	}()
	defer func() {
		select {
		case <-stopSampling:
		default:
			close(stopSampling)
		}
		<-sampled
		rec.write(t, out)
	}()

	runFaultScenarioRate(t, fc, begin, "soak", soakRate, 10*time.Second, func(r *faultRun) {
		r.modeName = "soak " + total.String()
		end := time.Now().Add(total)
		for i := 0; time.Now().Add(every).Before(end.Add(time.Second)); i++ {
			next := time.Now().Add(every)
			what := soakFault(r, i)
			rec.event(what)
			if d, ok := r.fc.awaitFullISR(r.t, r.topic, 90*time.Second); ok {
				r.logf("healed: every partition led with a full ISR %v after the fault ended", d.Round(10*time.Millisecond))
			} else {
				r.t.Fatalf("the cluster did not heal after %s\n%s", what, r.fc.evidence(r.topic, allPartitions(), 80))
			}
			time.Sleep(time.Until(next))
		}
		time.Sleep(time.Until(end))
	}, nil)

	close(stopSampling)
	<-sampled
	if total >= 10*time.Minute {
		for _, problem := range soakGrowth(rec.samples, time.Since(rec.start)) {
			t.Errorf("soak: %s", problem)
		}
	} else {
		t.Logf("soak of %v: under 10 minutes, growth not judged", total)
	}
}

// soakFault injects the i-th fault of the cycle and returns once the
// faulty node is back; it returns what it did.
func soakFault(r *faultRun, i int) string {
	const kinds = 6
	switch i % kinds {
	case 0:
		p, l := r.busiestLeader()
		if l < 0 {
			l = r.fc.LiveIDs()[0]
		}
		r.fc.Kill(l)
		r.faults++
		r.logf("SIGKILL node %d (leader of p%d)", l, p)
		time.Sleep(5 * time.Second)
		r.restartAll(l)
		return fmt.Sprintf("kill -9 leader %d for 5s", l)
	case 1:
		p, l := r.busiestLeader()
		if l < 0 {
			l = r.fc.LiveIDs()[0]
		}
		r.fc.Freeze(r.t, l)
		r.faults++
		r.logf("SIGSTOP node %d (leader of p%d)", l, p)
		time.Sleep(10 * time.Second)
		r.fc.Thaw(r.t, l)
		return fmt.Sprintf("freeze leader %d for 10s", l)
	case 2:
		id := r.fc.Controller()
		if id <= 0 {
			id = 1
		}
		r.fc.Isolate(id)
		r.faults++
		r.logf("node %d (the controller) cut off from the others", id)
		time.Sleep(15 * time.Second)
		r.fc.Rejoin(id)
		return fmt.Sprintf("isolate controller %d for 15s", id)
	case 3:
		_, keep := r.busiestLeader()
		if keep < 0 {
			keep = r.fc.LiveIDs()[0]
		}
		var victims []int
		for _, id := range r.fc.IDs() {
			if id != keep {
				victims = append(victims, id)
			}
		}
		killed := time.Now()
		for _, id := range victims {
			r.fc.Kill(id)
		}
		r.faults++
		r.logf("SIGKILL nodes %v at once (keeping %d)", victims, keep)
		time.Sleep(8 * time.Second)
		// As TestFaultKillTwo: nothing may be acknowledged while only one
		// node runs, after a grace for requests replicated as the kills
		// landed.
		r.noAcks = append(r.noAcks, [2]time.Time{killed.Add(time.Second), time.Now()})
		r.restartAll(victims...)
		return fmt.Sprintf("kill -9 nodes %v for 8s", victims)
	case 4:
		id := r.fc.IDs()[(i/kinds)%len(r.fc.IDs())]
		r.fc.Node(id).Stop()
		r.faults++
		r.logf("SIGTERM node %d (rolling restart)", id)
		r.restartAll(id)
		return fmt.Sprintf("clean restart of node %d", id)
	default:
		adm := r.fc.Admin(r.fc.HealthyIDs()[0])
		names := make([]string, 5)
		for k := range names {
			names[k] = fmt.Sprintf("soak-churn-%d-%d", i, k)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adm.CreateTopics(ctx, 3, 3, nil, names...); err != nil {
			r.logf("churn: create: %v", err)
		}
		time.Sleep(2 * time.Second)
		if _, err := adm.DeleteTopics(ctx, names...); err != nil {
			r.logf("churn: delete: %v", err)
		}
		r.faults++
		r.logf("created and deleted %d topics", len(names))
		return fmt.Sprintf("churn: %d topics created and deleted", len(names))
	}
}

// sample reads every node's /metrics (2 s bound each, so a frozen node
// costs one bounded wait) and the harness's own memory.
func (s *soakRecorder) sample(fc *faultCluster) {
	at := time.Since(s.start)
	var got []soakSample
	for i, addr := range fc.metrics {
		smp := soakSample{at: at, node: i + 1}
		if m, err := scrapeMetrics(addr, 2*time.Second); err == nil {
			smp.ok = true
			smp.rssMiB = m["process_resident_memory_bytes"] / (1 << 20)
			smp.fds = m["process_open_fds"]
			smp.goroutines = m["go_goroutines"]
		}
		got = append(got, smp)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	got = append(got, soakSample{at: at, node: 0, ok: true, rssMiB: float64(ms.Sys) / (1 << 20),
		goroutines: float64(runtime.NumGoroutine())})
	s.mu.Lock()
	s.samples = append(s.samples, got...)
	s.mu.Unlock()
}

// scrapeMetrics returns the unlabelled samples of a Prometheus text page.
func scrapeMetrics(addr string, timeout time.Duration) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.ContainsRune(line, '{') {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = f
		}
	}
	return out, sc.Err()
}

// soakGrowth compares each node's medians over the last fifth of the run
// with those over the second fifth (the first is warm-up). The margins
// leave room for caches that fill once and for a restart's fresh process;
// a leak of a goroutine per request or a descriptor per fault grows past
// them within the hour.
func soakGrowth(samples []soakSample, total time.Duration) []string {
	var problems []string
	window := func(node int, from, to float64) []soakSample {
		var w []soakSample
		for _, s := range samples {
			f := float64(s.at) / float64(total)
			if s.node == node && s.ok && f >= from && f < to {
				w = append(w, s)
			}
		}
		return w
	}
	median := func(w []soakSample, get func(soakSample) float64) float64 {
		v := make([]float64, len(w))
		for i, s := range w {
			v[i] = get(s)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	for node := 1; node <= 3; node++ {
		early, late := window(node, 0.2, 0.4), window(node, 0.8, 1.01)
		if len(early) < 3 || len(late) < 3 {
			problems = append(problems, fmt.Sprintf("node %d: too few samples (%d early, %d late)", node, len(early), len(late)))
			continue
		}
		for _, m := range []struct {
			name        string
			get         func(soakSample) float64
			factor, add float64
		}{
			{"resident MiB", func(s soakSample) float64 { return s.rssMiB }, 1.5, 64},
			{"open descriptors", func(s soakSample) float64 { return s.fds }, 1.25, 64},
			{"goroutines", func(s soakSample) float64 { return s.goroutines }, 1.5, 200},
		} {
			e, l := median(early, m.get), median(late, m.get)
			if l > e*m.factor+m.add {
				problems = append(problems, fmt.Sprintf("node %d: %s grew from a median of %.0f to %.0f (allowed %.0f)", node, m.name, e, l, e*m.factor+m.add))
			}
		}
	}
	return problems
}

// write saves soak.csv, soak-events.csv and soak.png into dir.
func (s *soakRecorder) write(t *testing.T, dir string) {
	s.mu.Lock()
	samples, events := slices.Clone(s.samples), slices.Clone(s.events)
	s.mu.Unlock()
	writeCSV := func(name string, rows [][]string) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Logf("soak: %v", err)
			return
		}
		defer f.Close()
		w := csv.NewWriter(f)
		_ = w.WriteAll(rows)
		if err := w.Error(); err != nil {
			t.Logf("soak: writing %s: %v", name, err)
		}
	}
	rows := [][]string{{"seconds", "node", "answered", "rss_mib", "open_fds", "goroutines"}}
	for _, smp := range samples {
		rows = append(rows, []string{fmt.Sprintf("%.0f", smp.at.Seconds()), strconv.Itoa(smp.node), strconv.FormatBool(smp.ok),
			fmt.Sprintf("%.1f", smp.rssMiB), fmt.Sprintf("%.0f", smp.fds), fmt.Sprintf("%.0f", smp.goroutines)})
	}
	writeCSV("soak.csv", rows)
	erows := [][]string{{"seconds", "fault"}}
	for _, e := range events {
		erows = append(erows, []string{fmt.Sprintf("%.0f", e.at.Seconds()), e.what})
	}
	writeCSV("soak-events.csv", erows)
	if err := soakPlot(samples, events, filepath.Join(dir, "soak.png")); err != nil {
		t.Logf("soak: plot: %v", err)
	}
	t.Logf("soak: %d samples and %d faults written to %s (soak.csv, soak-events.csv, soak.png)", len(samples), len(events), dir)
}

// soakPlot draws resident memory, descriptors and goroutines of the three
// nodes over time, one panel each, with a grey line at every fault.
func soakPlot(samples []soakSample, events []soakEvent, path string) error {
	colors := []color.Color{color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff}}
	panels := []struct {
		title string
		get   func(soakSample) float64
	}{
		{"resident memory (MiB)", func(s soakSample) float64 { return s.rssMiB }},
		{"open file descriptors", func(s soakSample) float64 { return s.fds }},
		{"goroutines", func(s soakSample) float64 { return s.goroutines }},
	}
	var rows [][]*plot.Plot
	for _, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "minutes"
		p.Y.Min = 0
		ymax := 1.0
		for node := 1; node <= 3; node++ {
			var xy plotter.XYs
			for _, s := range samples {
				if s.node == node && s.ok {
					xy = append(xy, plotter.XY{X: s.at.Minutes(), Y: pn.get(s)})
					ymax = max(ymax, pn.get(s))
				}
			}
			if len(xy) == 0 {
				continue
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return err
			}
			l.Color = colors[node-1]
			l.Width = vg.Points(1)
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("node %d", node), l)
		}
		for _, e := range events {
			l, err := plotter.NewLine(plotter.XYs{{X: e.at.Minutes(), Y: 0}, {X: e.at.Minutes(), Y: ymax * 1.05}})
			if err != nil {
				return err
			}
			l.Color = color.Gray{Y: 0xc0}
			l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			p.Add(l)
		}
		p.Y.Max = ymax * 1.1
		p.Legend.Top = true
		rows = append(rows, []*plot.Plot{p})
	}
	img := vgimg.New(vg.Points(900), vg.Points(300*float64(len(rows))))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadX: vg.Millimeter, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
