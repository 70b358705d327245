package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/protocol"
)

// dispatch: the one way a decoded request reaches its handler, on every
// Kafka listener this node serves — the client listeners and the
// CONTROLLER listener alike. For each request it looks the key up in the
// registry (registry.go), runs the key's authorization rule (authz.go),
// audits denials and mutations (api.Audit), and only then hands the
// request to the key's handler: the broker's own on a client listener, the
// controller role's on the CONTROLLER listener. The front end
// (protocol.Server) has already checked the version against the same
// registry's table for that listener.

// connHandler adapts the broker to the protocol front end for one
// listener: client listener number listener, or the CONTROLLER listener
// (ctl).
type connHandler struct {
	b        *Broker
	listener int
	ctl      bool
}

// errNoEntry is a request for a key the listener's table let through but
// the registry does not serve there: a bug, answered by closing the
// connection.
var errNoEntry = errors.New("broker: request for an api key this listener does not serve")

func (h *connHandler) Handle(ctx context.Context, req *protocol.Request, respond protocol.Responder) {
	a := h.b.reg.Get(req.Key)
	if a == nil || (h.ctl && !a.Controller.Served) || (!h.ctl && !a.Client.Served) {
		respond(nil, fmt.Errorf("%w: %d", errNoEntry, req.Key))
		return
	}
	start := time.Now()
	timed := h.b.metrics.RequestStarted(req.Key, req.Version, req.Body, start)
	defer timed.Handled()
	listener := h.listener
	if h.ctl {
		listener = api.CtlListener
	}
	cc := &api.Conn{Ctx: ctx, ClientID: req.ClientID, ClientHost: req.ClientHost, Principal: req.Principal, Listener: listener, Version: req.Version,
		Fail: func(err error) { respond(nil, err) }, Mute: req.Mute}
	// Produce is the one handler that keeps nothing of the request once it
	// returns: the batches are written (pwrite copies them) before that.
	req.Recycle = req.Key == 0 && !h.ctl
	deny, fix := h.b.authorize(cc, a, req.Body) // authz.go
	if c, ok := deny.(*api.Close); ok {
		respond(nil, c.Err)
		return
	}
	if deny != nil {
		h.b.audit.Admin(cc, a, req.Body, deny)
		noteResponseErrors(req.Client, req.Key, req.Version, deny)
		respond(deny, nil)
		return
	}
	handle := a.Handle
	if h.ctl && !a.CtlLocal {
		handle = bind(h.b, answerByController)
	}
	handle(cc, req.Body, func(resp kmsg.Response) {
		timed.Done()
		if fix != nil && resp != nil {
			fix(resp)
		}
		h.b.audit.Admin(cc, a, req.Body, resp)
		if resp == nil {
			respond(nil, nil)
			return
		}
		noteResponseErrors(req.Client, req.Key, req.Version, resp)
		respond(resp, nil)
	})
	if !h.ctl {
		h.b.quotas.requestTime(cc, req.Body, time.Since(start))
	}
}

// answerByController is the handler of every key the CONTROLLER listener
// serves for the controller role: a node that is not the active
// controller answers NOT_CONTROLLER, and the broker that sent it retries
// at the leader.
func answerByController(b *Broker, cc *api.Conn, req kmsg.Request, respond func(kmsg.Response)) {
	notController := func() {
		if resp := b.reg.ErrorResponse(req, kerr.NotController.Code); resp != nil {
			respond(resp)
			return
		}
		cc.Fail(fmt.Errorf("broker: no answer for api key %d on the CONTROLLER listener", req.Key()))
	}
	c := b.ctlImage.Load()
	if c == nil {
		notController()
		return
	}
	c.Answer(cc.Ctx, req, func(resp kmsg.Response) {
		if resp == nil {
			notController()
			return
		}
		respond(resp)
	})
}
