package protocol

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Responder answers one request exactly once, from any goroutine. A nil
// response with a nil error sends nothing (acks=0 produce); a non-nil error
// closes the connection after the responses before it have been written.
type Responder func(resp kmsg.Response, err error)

// Releaser is implemented by responses that borrow pooled buffers: the
// writer calls Release once the response has been encoded, after which the
// buffers may be reused.
type Releaser interface {
	Release()
}

// SizeHinter is implemented by responses that know roughly how large they
// encode (a fetch carrying megabytes of records), so the writer can size its
// buffer once instead of growing it by doubling.
type SizeHinter interface {
	SizeHint() int
}

// Handler serves decoded requests. Handle is called on the connection's reader
// goroutine in request order, so it must not block on anything slow: work that
// waits (acks=all, long-poll fetch) finishes on another goroutine and calls
// respond later. ctx is cancelled when the connection closes.
type Handler interface {
	Handle(ctx context.Context, req *Request, respond Responder)
}

// ServerConfig tunes the front end.
type ServerConfig struct {
	// Name is the listener's name, as the client registry reports it.
	Name          string
	MaxFrameBytes int32         // socket.request.max.bytes
	MaxInFlight   int           // requests read ahead per connection before reading stalls
	IdleTimeout   time.Duration // connections.max.idle.ms; 0 = never
	DrainTimeout  time.Duration // how long Close waits for in-flight requests
	// Admit, if set, is the one accept-time check (connection counts,
	// per-ip connection_creation_rate), asked about each accepted
	// connection before it is served. Refused (ok false), nothing is read
	// and it is closed after delay (0: at once; a rate-throttled client
	// waits so it does not reconnect in a tight loop). Admitted, release,
	// if not nil, is called once when the connection ends.
	Admit func(remote net.Addr) (ok bool, delay time.Duration, release func())
	// Budget, if set, bounds the request bytes being read or waiting for
	// their handler, across every server sharing it
	// (queued.max.request.bytes; see limits.go).
	Budget *Budget
	// FailedAuthDelay is how long a failed SASL authentication waits before
	// its answer (and the connection's close), so a password cannot be
	// guessed at full speed (connection.failed.authentication.delay.ms;
	// auth.go).
	FailedAuthDelay time.Duration
	// TLS, if set, makes the listener TLS: called per connection, so a
	// reloaded certificate applies to new connections (protocol/tls.go).
	TLS func() *tls.Config
	// TLSPrincipal is the principal of a TLS client certificate
	// (ssl.principal.mapping.rules); "" = User:ANONYMOUS.
	TLSPrincipal func(*tls.ConnectionState) string
	// SASL, if set, must authenticate a connection before it is served
	// (auth.go); nil = the listener needs no SASL.
	SASL Authenticator
}

// Server accepts Kafka connections and runs the per-connection pipeline.
//
// Each connection has one reader goroutine (decode, dispatch in order) and one
// writer goroutine (responses in request order). The two meet through a queue
// of slots bounded by MaxInFlight, which is the connection's backpressure:
// a client that pipelines faster than requests complete stops being read.
type Server struct {
	cfg     ServerConfig
	handler Handler
	vs      Versions
	log     zerolog.Logger

	mu struct {
		sync.Mutex
		conns  map[*conn]struct{}
		closed bool
	}
	// tasks runs the accept loops and each connection's reader and
	// writer; Close stops it.
	tasks lifecycle.Group
}

// NewServer builds a server; Serve starts it on a listener.
func NewServer(cfg ServerConfig, h Handler, vs Versions, log zerolog.Logger) *Server {
	if cfg.MaxInFlight < 1 {
		cfg.MaxInFlight = 1
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 10 * time.Second
	}
	s := &Server{cfg: cfg, handler: h, vs: vs, log: log}
	s.mu.conns = make(map[*conn]struct{})
	return s
}

// Serve accepts on ln until Close. It returns immediately; the accept loop
// runs on its own goroutine. After Close it serves nothing.
func (s *Server) Serve(ln net.Listener) {
	s.tasks.Go(func() {
		// Out of file descriptors and the like: back off, keep serving.
		backoff := lifecycle.Backoff{Initial: 5 * time.Millisecond, Max: time.Second}
		fails := 0 // accepts failed in a row
		for {
			nc, err := ln.Accept()
			if err != nil {
				if s.isClosed() || errors.Is(err, net.ErrClosed) {
					return
				}
				fails++
				delay := backoff.Delay(fails)
				s.log.Warn().Err(err).Dur("retry_in", delay).Msg("accept failed")
				time.Sleep(delay)
				continue
			}
			fails = 0
			s.startConn(nc)
		}
	})
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closed
}

func (s *Server) startConn(nc net.Conn) {
	release, ok := s.admit(nc)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		s:        s,
		nc:       nc,
		ctx:      ctx,
		cancel:   cancel,
		slots:    make(chan *slot, s.cfg.MaxInFlight),
		log:      s.log.With().Str("remote", nc.RemoteAddr().String()).Logger(),
		stopCh:   make(chan struct{}),
		admitted: release,
		client:   newClient(s.cfg.Name, nc.RemoteAddr().String()),
	}
	c.muteFn = c.mute
	c.wrapTLS()
	if h, _, err := net.SplitHostPort(nc.RemoteAddr().String()); err == nil {
		c.host = "/" + h
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		nc.Close()
		cancel()
		if release != nil {
			release()
		}
		return
	}
	s.mu.conns[c] = struct{}{}
	// Neither is refused: Close cancels the group only after setting
	// closed, which this holds mu against.
	s.tasks.Go(c.readLoop)
	s.tasks.Go(c.writeLoop)
	s.mu.Unlock()
}

// Close stops accepting (the caller closes its listeners), stops reading new
// requests, lets in-flight ones finish and be written, then closes every
// connection. It waits at most DrainTimeout for stragglers.
func (s *Server) Close() {
	s.mu.Lock()
	s.mu.closed = true
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.tasks.Cancel() // Serve refuses from now on; connections have contexts of their own
	for _, c := range conns {
		c.stopReading()
	}
	select {
	case <-s.tasks.Stopped():
	case <-time.After(s.cfg.DrainTimeout):
		s.log.Warn().Msg("connections did not drain in time; closing them")
		for _, c := range conns {
			c.cancel()
			c.nc.Close()
		}
		<-s.tasks.Stopped()
	}
}

// slot is one request's place in the response order.
type slot struct {
	key  int16
	corr int32
	done chan struct{} // closed once resp/err are set
	once sync.Once
	resp kmsg.Response
	err  error
}

func (sl *slot) respond(resp kmsg.Response, err error) {
	sl.once.Do(func() {
		sl.resp, sl.err = resp, err
		close(sl.done)
	})
}

type conn struct {
	s      *Server
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan *slot // closed by readLoop when it stops
	log    zerolog.Logger
	host   string // "/" + peer IP
	// admitted is Admit's release, called by writeLoop as the socket closes.
	admitted func()

	stopping bool // set before the read deadline that ends readLoop; read only by readLoop after its read fails
	stopMu   sync.Mutex
	stopCh   chan struct{} // closed with stopping set, to end a mute

	// notBefore (unix ns) is when the reader may read the next request:
	// the end of the longest mute asked for (Request.Mute).
	notBefore atomic.Int64
	muteFn    func(time.Duration) // c.mute, made once rather than per request
	// tlsPrincipal is the TLS client certificate's principal ("" when
	// none); set by the reader before its first request, read only by it.
	tlsPrincipal string
	// client is the connection's record in the client registry.
	client *Client

	auth authState // readLoop's own
}

func (c *conn) stopReading() {
	c.stopMu.Lock()
	if !c.stopping {
		close(c.stopCh)
	}
	c.stopping = true
	c.stopMu.Unlock()
	c.nc.SetReadDeadline(time.Now())
}

// mute holds the reader for d from now, or longer if already muted.
func (c *conn) mute(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := c.notBefore.Load()
		if cur >= until || c.notBefore.CompareAndSwap(cur, until) {
			return
		}
	}
}

// waitMuted returns once the connection is no longer muted, it closes, or
// the server stops reading.
func (c *conn) waitMuted() {
	for {
		d := time.Until(time.Unix(0, c.notBefore.Load()))
		if d <= 0 {
			return
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-c.stopCh:
			t.Stop()
			return
		}
	}
}

func (c *conn) isStopping() bool {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	return c.stopping
}

func (c *conn) readLoop() {
	defer close(c.slots)
	if !c.tlsHandshake() {
		return
	}
	br := bufio.NewReaderSize(c.nc, 32<<10)
	for {
		c.waitMuted()
		if c.s.cfg.IdleTimeout > 0 && !c.isStopping() {
			c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		}
		g := c.frameGrant()
		frame, err := c.nextFrame(br, g)
		if err != nil {
			g.release()
			c.readFailed(err)
			return
		}
		if c.auth.raw { // a v0 exchange's bare token (auth.go)
			if !c.rawStep(frame) {
				return
			}
			continue
		}
		req, err := ParseRequest(frame, c.s.vs)
		if err != nil {
			g.release()
			ev := c.log.Warn().Err(err)
			if req != nil {
				ev = ev.Int16("api_key", req.Key).Int16("api_version", req.Version).Str("client_id", req.ClientID)
			}
			ev.Msg("closing connection: bad request")
			c.cancelSoon()
			return // the writer sends what is owed, then closes
		}
		req.ClientHost = c.host
		req.Mute = c.muteFn
		req.Principal = c.principal()
		req.Client = c.client
		c.client.NoteRequest(req)
		sl := &slot{key: req.Key, corr: req.CorrelationID, done: make(chan struct{})}
		select {
		case c.slots <- sl:
		case <-c.ctx.Done():
			g.release()
			return
		}
		if handled, stop := c.gate(req, sl); stop {
			return // the writer sends what is owed, then closes
		} else if handled {
			continue
		}
		if req.Body == nil { // ApiVersions newer than ours
			g.release()
			sl.respond(UnsupportedAPIVersions(c.s.vs), nil)
			continue
		}
		c.dispatch(req, sl)
		g.release() // the handler has taken the request
		if req.Recycle {
			recycleFrame(req.frame)
		}
	}
}

// dispatch runs the handler; a panic in it costs this connection only.
func (c *conn) dispatch(req *Request, sl *slot) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Int16("api_key", req.Key).Int16("api_version", req.Version).
				Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).Msg("handler panic; closing connection")
			sl.respond(nil, fmt.Errorf("handler panic: %v", r))
		}
	}()
	c.s.handler.Handle(c.ctx, req, sl.respond)
}

// readFailed ends the connection after its read side failed. A peer that
// hung up or broke the stream cannot read what is owed, so waiting work
// (long polls, parked joins) is cancelled at once; otherwise a vanished
// client would pin the socket and its goroutines until its MaxWait. A peer
// that sent a bad frame gets a moment for the responses already owed.
func (c *conn) readFailed(err error) {
	switch {
	case c.isStopping():
		// Shutdown: the writer finishes what was read.
		return
	case errors.Is(err, io.EOF):
		// Client hung up between requests.
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Info().Msg("closing idle connection")
	case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrFrameSize):
		c.log.Warn().Err(err).Msg("closing connection: bad frame")
		c.cancelSoon()
		return
	case errors.Is(err, net.ErrClosed):
	default:
		c.log.Debug().Err(err).Msg("connection read ended")
	}
	c.cancel()
}

// cancelSoon bounds how long a misbehaving peer's connection lingers for the
// responses owed to it.
func (c *conn) cancelSoon() { time.AfterFunc(time.Second, c.cancel) }

func (c *conn) writeLoop() {
	defer func() {
		c.cancel()
		c.nc.Close()
		if c.admitted != nil {
			c.admitted()
		}
		c.s.mu.Lock()
		delete(c.s.mu.conns, c)
		c.s.mu.Unlock()
	}()
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	buf := getBuf(16 << 10)
	var next *slot // read ahead from c.slots, not yet written
	for {
		sl := next
		next = nil
		if sl == nil {
			var ok bool
			if sl, ok = <-c.slots; !ok {
				bw.Flush()
				return
			}
		}
		select {
		case <-sl.done:
		case <-c.ctx.Done():
			return
		}
		if sl.err != nil {
			bw.Flush()
			c.log.Warn().Err(sl.err).Int16("api_key", sl.key).Msg("closing connection")
			c.drain()
			return
		}
		if sl.resp != nil {
			if h, ok := sl.resp.(SizeHinter); ok && cap(buf) < h.SizeHint() {
				putBuf(buf)
				buf = getBuf(h.SizeHint())
			}
			buf = AppendResponse(buf[:0], sl.key, sl.corr, sl.resp)
			if r, ok := sl.resp.(Releaser); ok {
				r.Release()
			}
			_, err := bw.Write(buf)
			if cap(buf) > 1<<20 {
				// Big (fetch) response buffers go back to a shared pool
				// rather than stay pinned to this connection.
				putBuf(buf)
				buf = nil
			}
			if err != nil {
				c.drain()
				return
			}
		}
		// Pipelined responses that are already done share one write; anything
		// still pending (a long poll, an acks=all wait) must not hold back
		// what is ready, so flush before waiting on it.
		select {
		case n, ok := <-c.slots:
			if !ok {
				bw.Flush()
				return
			}
			next = n
			if isDone(n.done) {
				continue
			}
		default:
		}
		if err := bw.Flush(); err != nil {
			c.drain()
			return
		}
	}
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// drain stops the reader and unblocks it if it waits for queue space.
func (c *conn) drain() {
	c.cancel()
	c.nc.Close()
	for range c.slots {
	}
}

// bigBufs recycles large response buffers between connections.
var bigBufs sync.Pool

// getBuf returns an empty buffer with room for at least n bytes.
func getBuf(n int) []byte {
	if b, ok := bigBufs.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:0]
	}
	return make([]byte, 0, n)
}

func putBuf(b []byte) {
	if cap(b) < 64<<10 || cap(b) > 64<<20 {
		return
	}
	b = b[:0]
	bigBufs.Put(&b)
}
