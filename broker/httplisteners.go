package broker

import (
	"errors"
	"net"
	"net/http"
	"time"
)

// The node's HTTP listeners (the metrics port, serveMetrics; the web
// console, serveConsole) share this plumbing: a server per listener run
// by goLoop, closed when the broker stops.

// serveHTTP serves h on addr until the broker stops; what names it in
// logs.
func (b *Broker) serveHTTP(addr string, h http.Handler, what string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	b.serveHTTPOn(ln, h, what)
	return nil
}

// serveHTTPOn serves h on ln until the broker stops, and closes ln.
func (b *Broker) serveHTTPOn(ln net.Listener, h http.Handler, what string) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	b.goLoop(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.log.Warn().Err(err).Str("serving", what).Msg("HTTP listener")
		}
	})
	b.goLoop(func() {
		<-b.stop
		srv.Close()
	})
	b.log.Info().Str("addr", ln.Addr().String()).Msg("serving " + what)
}
