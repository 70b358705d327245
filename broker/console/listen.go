package console

import (
	"fmt"
	"net"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/httpserve"
	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// Listen serves the console of src on addr until tasks stops, answering
// only the Host names it is reached by (Hosts: the defence against DNS
// rebinding), those of addr and of allowedHosts (the AllowedHostsKey
// setting). The names come from the bound address, so the listener is
// opened first: a :0 port is known only then.
func Listen(tasks *lifecycle.Group, addr, allowedHosts string, src Source, log zerolog.Logger) error {
	allowed, err := ParseAllowedHosts(allowedHosts)
	if err != nil {
		return fmt.Errorf("%s: %w", AllowedHostsKey, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hosts, err := NewHosts(addr, ln.Addr().String(), allowed)
	if err != nil {
		ln.Close()
		return err
	}
	if hosts.Unchecked() {
		log.Warn().Str("addr", ln.Addr().String()).Str("key", AllowedHostsKey).
			Msg("the web console listens on every address and so answers any Host header: a web page a visitor opens can read it through DNS rebinding; name the hosts it is reached by in " + AllowedHostsKey)
	}
	httpserve.Serve(tasks, ln, NewHostFilter(New(src, log), hosts, log), "the web console", log)
	return nil
}
