package tier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fjordlog/fjord/storage"
)

// ReadPool runs consumers' reads of the remote store off the fetch path
// (Kafka's remote.log.reader.* pool and DelayedRemoteFetch, KIP-405): a
// fetch that reaches below the local log starts a read here and goes on
// with its local partitions; the read's result waits, keyed by what was
// asked, for the next fetch of that partition and offset (or the same
// fetch, once it has waited for the read), which takes it. So a slow
// store delays only the partitions read from it.
//
// Do runs a one-off lookup under the same budgets.
//
// Budgets: at most Threads reads run at once and MaxPending more wait
// for a thread; a read asked beyond both is refused (ErrReadPoolFull),
// as Kafka's reader pool refuses a task. Results not taken are kept for
// resultTTL and up to maxResultBytes in all, then dropped (the next
// fetch reads again, from the read cache when there is one).
//
// Invariants: every task in mu.tasks is either running or queued (done
// open; counted in mu.active) or finished (done closed, at most
// resultTTL old, its bytes counted in mu.resultBytes); a task is taken
// (deleted) once. mu.active also counts Do's lookups until they return.
type ReadPool struct {
	threads    chan struct{} // a token per read running
	maxActive  int           // Threads + MaxPending
	goFn       func(func()) bool
	base       context.Context
	timeout    time.Duration
	resultTTL  time.Duration
	maxResults int64

	mu struct {
		sync.Mutex
		tasks       map[ReadKey]*readTask
		active      int
		resultBytes int64
	}
}

// ReadKey is what a consumer's remote read is asked for: a result is
// served only to a fetch asking the same.
type ReadKey struct {
	TopicID        [16]byte
	Partition      int32
	Offset         int64
	ReadCommitted  bool
	MaxBytesBucket int // log2 of the bytes asked: a result read for a far smaller budget is not reused
}

// ReadResult is a finished read: whole batches and, for read_committed,
// their aborted transactions (never nil then), or the error.
type ReadResult struct {
	Data    []byte
	Aborted []storage.AbortedTxn
	OK      bool // a copied segment held the offset
	Err     error
}

type readTask struct {
	done     chan struct{}
	res      ReadResult
	finished time.Time
}

// ErrReadPoolFull: remote.log.reader.threads reads are running and
// remote.log.reader.max.pending.tasks more wait.
var ErrReadPoolFull = errors.New("tier: remote reads at remote.log.reader.threads + remote.log.reader.max.pending.tasks")

const (
	defaultResultTTL = 30 * time.Second
	// maxResultBytes bounds the results waiting to be taken.
	maxResultBytes = 256 << 20
)

// NewReadPool returns a pool of threads readers with maxPending more
// queued. goFn runs a goroutine the node tracks (false: it is closing);
// base is cancelled when the node stops; timeout bounds one read.
func NewReadPool(threads, maxPending int, timeout time.Duration, base context.Context, goFn func(func()) bool) *ReadPool {
	p := &ReadPool{
		threads: make(chan struct{}, max(threads, 1)), maxActive: max(threads, 1) + max(maxPending, 0),
		goFn: goFn, base: base, timeout: timeout, resultTTL: defaultResultTTL, maxResults: maxResultBytes,
	}
	p.mu.tasks = make(map[ReadKey]*readTask)
	return p
}

// Poll asks for key's read: the result when one has finished (taken:
// done is true), else a channel closed when the read under way (started
// now with read, if none was) finishes. ErrReadPoolFull when the pool is
// at its bound.
func (p *ReadPool) Poll(key ReadKey, read func(ctx context.Context) ReadResult) (res ReadResult, done bool, wait <-chan struct{}, err error) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(now)
	if t, ok := p.mu.tasks[key]; ok {
		select {
		case <-t.done:
			delete(p.mu.tasks, key)
			p.mu.resultBytes -= int64(len(t.res.Data))
			return t.res, true, nil, nil
		default:
			return ReadResult{}, false, t.done, nil
		}
	}
	if p.mu.active >= p.maxActive {
		return ReadResult{}, false, nil, ErrReadPoolFull
	}
	t := &readTask{done: make(chan struct{})}
	started := p.goFn(func() {
		res := p.run(read, nil)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.mu.active--
		t.res, t.finished = res, time.Now()
		if p.mu.resultBytes+int64(len(res.Data)) > p.maxResults {
			delete(p.mu.tasks, key) // no room: the next fetch reads again
		} else {
			p.mu.resultBytes += int64(len(res.Data))
		}
		close(t.done)
	})
	if !started {
		return ReadResult{}, false, nil, fmt.Errorf("tier: remote read: %w", context.Canceled)
	}
	p.mu.active++
	p.mu.tasks[key] = t
	return ReadResult{}, false, t.done, nil
}

// Do runs task once on the pool, as a read but neither keyed nor kept:
// for a lookup whose answer only its asker wants (ListOffsets by
// timestamp below the local log), so it shares the reads' threads and
// pending budget rather than opening a second, unbounded path to the
// store. task gets the read's context (the pool's timeout from now) and
// nil, or a nil context and the error that kept it from running (no
// thread came within the timeout, or the node stopped). Do does not wait
// for task; ErrReadPoolFull when the pool is at its bound (task is then
// not called).
func (p *ReadPool) Do(task func(ctx context.Context, err error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.active >= p.maxActive {
		return ErrReadPoolFull
	}
	started := p.goFn(func() {
		p.run(func(ctx context.Context) ReadResult {
			task(ctx, nil)
			return ReadResult{}
		}, func(err error) { task(nil, err) })
		p.mu.Lock()
		p.mu.active--
		p.mu.Unlock()
	})
	if !started {
		return fmt.Errorf("tier: remote lookup: %w", context.Canceled)
	}
	p.mu.active++ // under mu: the task's own decrement comes after
	return nil
}

// run waits for a thread and reads, within the pool's timeout from when
// the read was asked. Without a thread in time, the error goes to
// refused when it is not nil.
func (p *ReadPool) run(read func(ctx context.Context) ReadResult, refused func(error)) ReadResult {
	ctx, cancel := context.WithTimeout(p.base, p.timeout)
	defer cancel()
	select {
	case p.threads <- struct{}{}:
		defer func() { <-p.threads }()
	case <-ctx.Done():
		err := fmt.Errorf("tier: waiting for a remote reader thread: %w", context.Cause(ctx))
		if refused != nil {
			refused(err)
		}
		return ReadResult{Err: err}
	}
	return read(ctx)
}

// expireLocked drops finished results older than resultTTL.
func (p *ReadPool) expireLocked(now time.Time) {
	for k, t := range p.mu.tasks {
		if !t.finished.IsZero() && now.Sub(t.finished) > p.resultTTL {
			select {
			case <-t.done:
				delete(p.mu.tasks, k)
				p.mu.resultBytes -= int64(len(t.res.Data))
			default:
			}
		}
	}
}

// Pending is the reads (and Do's lookups) running or queued.
func (p *ReadPool) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.active
}
