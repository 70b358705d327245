package httpserve

import (
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// Listen serves h on addr until tasks stops; what names it in logs.
func Listen(tasks *lifecycle.Group, addr string, h http.Handler, what string, log zerolog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	Serve(tasks, ln, h, what, log)
	return nil
}

// Serve serves h on ln until tasks stops, and closes ln. The server and
// the goroutine that closes it are both tasks' goroutines, so stopping
// tasks waits for the listener to be closed.
func Serve(tasks *lifecycle.Group, ln net.Listener, h http.Handler, what string, log zerolog.Logger) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	tasks.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn().Err(err).Str("serving", what).Msg("HTTP listener")
		}
	})
	stop := tasks.Context().Done()
	tasks.Go(func() {
		<-stop
		srv.Close()
	})
	log.Info().Str("addr", ln.Addr().String()).Msg("serving " + what)
}
