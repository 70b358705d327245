package quota

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fjordlog/fjord/controller"
)

func testImage(t testing.TB, e controller.QuotaEntity, key string, v float64) *controller.Image {
	t.Helper()
	img, err := new(controller.Image).Apply(1, controller.NewRecord(controller.ClientQuota{Entity: e.Parts(), Key: key, Value: &v}))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestQuotaSimulatedProducer drives a client that always has a batch ready and
// waits out every throttle, on a simulated clock. Kafka's algorithm lets
// a new client have the whole window's worth (Samples-1 windows of the
// bound) at once; then it waits until that sample expires, 11 s on, and
// the cycle repeats. So just before each expiry the client has had the
// bound, and over whole cycles it averages the bound.
func TestQuotaSimulatedProducer(t *testing.T) {
	const bound, batch = 256 << 10, 16 << 10
	img := testImage(t, controller.QuotaEntity{ClientID: controller.Named("A")}, controller.QuotaProducerByteRate, bound)
	q := New(MaxSensors)
	start := time.Unix(1000, 0)
	now := start
	sent := map[time.Duration]float64{}
	total := 0.0
	marks := []time.Duration{10900 * time.Millisecond, 65900 * time.Millisecond}
	for now.Sub(start) < time.Minute+10*time.Second {
		total += batch
		tms := q.Record(now, img, Produce, "ANONYMOUS", "A", batch, false)
		now = now.Add(2*time.Millisecond + time.Duration(tms)*time.Millisecond) // 2 ms per round trip
		for _, m := range marks {
			if now.Sub(start) < m {
				sent[m] = total
			}
		}
	}
	for _, m := range marks {
		if r := sent[m] / m.Seconds() / bound; r < 0.95 || r > 1.1 {
			t.Errorf("over %v: %.3f of the bound", m, r)
		}
	}
}

// TestQuotaSensorsInvariants floods a small table with random clients, times
// and charges, and checks after every Record the table's invariant and
// its rates' (len(samples) <= Samples, current in range).
func TestQuotaSensorsInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := NewSensors(64)
	now := int64(0)
	for i := range 100000 {
		now += rng.Int64N(50)
		k := Key{Kind: Kind(rng.IntN(4)), Client: "c" + strconv.Itoa(rng.IntN(500)), HasClient: true}
		s.Record(now, k, 100, float64(rng.IntN(200)), rng.IntN(2) == 0)
		if s.Len() > s.max {
			t.Fatalf("record %d: %d sensors over the bound %d", i, s.Len(), s.max)
		}
		sn := s.m[k]
		if sn == nil {
			t.Fatalf("record %d: the charged sensor %v is not in the table", i, k)
		}
		if len(sn.r.samples) > Samples || sn.r.current < 0 || sn.r.current >= len(sn.r.samples) {
			t.Fatalf("record %d: %v has %d samples, current %d", i, k, len(sn.r.samples), sn.r.current)
		}
	}
}

// TestQuotaPure: the core reads no clock and starts no goroutine (callers pass
// now), and reaches the broker only through what it is given.
func TestQuotaPure(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: a goroutine", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" && slices.Contains([]string{"Now", "Since", "Until", "Sleep", "After", "Tick", "NewTimer", "NewTicker", "AfterFunc"}, n.Sel.Name) {
					t.Errorf("%s: time.%s", fset.Position(n.Pos()), n.Sel.Name)
				}
			}
			return true
		})
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/fjordlog/fjord/broker" || strings.HasPrefix(dep, "github.com/prometheus/") {
			t.Errorf("imports %s", dep)
		}
	}
}

// TestQuotaShapes: resolve skips a level by its index in levels, so each
// level's shape must be that index, and the ip shapes distinct from them.
func TestQuotaShapes(t *testing.T) {
	for i, e := range levels("u", "c") {
		if shape(e) != i {
			t.Errorf("level %d %v has shape %d", i, e, shape(e))
		}
	}
	if a, b := shape(controller.QuotaEntity{IP: controller.Named("10.0.0.1")}), shape(controller.QuotaEntity{IP: controller.DefaultName()}); a < 8 || b < 8 || a == b || max(a, b) > 10 {
		t.Errorf("ip shapes %d and %d", a, b)
	}
}
