package quota

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/controller"
)

// MaxSensors is the bound on a broker's sensors: client ids are the
// client's to choose, so the table cannot grow with them.
const MaxSensors = 10000

// sensor is one Key's rate and when it was last charged.
type sensor struct {
	r    rate
	last int64 // ms of the last record
}

// Sensors is the sensor table, bounded by max. When a new sensor would
// pass the bound, the idle ones go first (every sample expired, so
// dropping them loses nothing); if none is idle, the least recently
// charged eighth go, and those clients' history with them. Evicting an
// eighth rather than one sensor makes a flood of new client ids pay for
// one scan per many inserts. Not safe for concurrent use (Quotas guards
// one).
//
// Invariant: 1 <= max and len(m) <= max.
type Sensors struct {
	max int
	m   map[Key]*sensor
}

// NewSensors returns an empty table of at most max sensors (at least one).
func NewSensors(max int) *Sensors {
	s := &Sensors{}
	s.init(max)
	return s
}

func (s *Sensors) init(n int) {
	s.max, s.m = max(n, 1), map[Key]*sensor{}
}

// Len is the number of sensors tracked.
func (s *Sensors) Len() int { return len(s.m) }

// Record charges v at now (ms) to k's sensor, whose quota is bound, and
// returns the throttle time in ms: 0 within the bound, else the delay that
// brings the rate back to it. With undo, a charge that breaks the bound is
// taken back: the caller refuses what it was for. Request and connection
// throttles are capped at one window, as Kafka's are.
func (s *Sensors) Record(now int64, k Key, bound, v float64, undo bool) int64 {
	sn := s.get(k, now)
	sn.r.record(v, now)
	sn.last = now
	observed, window := sn.r.measure(now)
	t := throttleMs(observed, bound, window)
	if t > 0 && undo {
		sn.r.record(-v, now)
	}
	if k.Kind == Request || k.Kind == Connection {
		t = min(t, WindowMs)
	}
	return t
}

// get returns k's sensor, making room for a new one if need be.
func (s *Sensors) get(k Key, now int64) *sensor {
	if sn := s.m[k]; sn != nil {
		return sn
	}
	if len(s.m) >= s.max {
		for k, sn := range s.m {
			if sn.r.idle(now) {
				delete(s.m, k)
			}
		}
	}
	if len(s.m) >= s.max {
		type used struct {
			k    Key
			last int64
		}
		all := make([]used, 0, len(s.m))
		for k, sn := range s.m {
			all = append(all, used{k, sn.last})
		}
		slices.SortFunc(all, func(a, b used) int { return cmp.Compare(a.last, b.last) })
		for _, u := range all[:max(1, len(all)/8)] {
			delete(s.m, u.k)
		}
	}
	sn := &sensor{}
	s.m[k] = sn
	return sn
}

// Quotas is a broker's client quota state: one Sensors shared by every
// connection's goroutine, under a mutex held only for map and arithmetic
// work (a leaf lock). The quotas themselves are not kept: each call
// resolves against the image it is given, so a change applies to the
// next request.
type Quotas struct {
	shapes atomic.Pointer[shapes] // of the last image resolved against
	mu     struct {
		sync.Mutex
		s Sensors
	}
}

// New returns Quotas with at most max sensors.
func New(max int) *Quotas {
	q := &Quotas{}
	q.mu.s.init(max)
	return q
}

// Resolve finds the bound img's quotas give kind for (user, client) (for
// Connection, client is the ip), by Kafka's precedence, and the sensor it
// charges. ok is false when no quota applies; img may be nil.
func (q *Quotas) Resolve(img *controller.Image, kind Kind, user, client string) (bound float64, k Key, ok bool) {
	if !Active(img) {
		return 0, Key{}, false
	}
	s := q.shapes.Load()
	if s == nil || s.img != img {
		s = shapesOf(img)
		q.shapes.Store(s)
	}
	return resolve(img, s.mask, kind, user, client)
}

// Record charges v at now to the sensor img's quotas give kind for (user,
// client) (Resolve) and returns the throttle time in ms, as
// Sensors.Record; 0 when no quota applies.
func (q *Quotas) Record(now time.Time, img *controller.Image, kind Kind, user, client string, v float64, undo bool) int64 {
	bound, k, ok := q.Resolve(img, kind, user, client)
	if !ok {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.s.Record(now.UnixMilli(), k, bound, v, undo)
}
