package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/controller"
)

// Forwarding: the admin requests that change cluster metadata (topics,
// partitions, elections, reassignments, configs, quotas, SCRAM
// credentials, ACLs) are decided by the active controller. The broker a
// client asked sends the request there and answers once its own image
// shows the outcome, so a client that made a change here sees it here at
// once. forward is that sequence, the same for every such API:
//
//  1. a tracked goroutine (goLoop): the connection's reader must not wait;
//  2. the request's context, bounded by its timeout (adminCtx);
//  3. prepare, if set: checks that answer parts of the request here and
//     are too slow for the reader (the descriptor budget);
//  4. the call to the active controller (ctllink.Client.Call: in-process, or
//     over the CONTROLLER listener, retried while there is none);
//  5. the fallback when there is no usable answer: the key's error
//     response (registry.go), REQUEST_TIMED_OUT for a controller that
//     could not be reached, UNKNOWN_SERVER_ERROR for an answer of another
//     type or shape;
//  6. the wait until this broker's image reaches the metadata offset at
//     which the controller committed the answer's records (waitOffset),
//     bounded by the request's timeout and waitMax;
//  7. finish, if set: the handler's own step (the answers to a forwarded
//     subset put back among those given here, scattering; what the broker
//     adds itself), then respond.
//
// forwardTo is steps 4-6, for callers that are not a handler's goroutine.
//
// Step 6 used to be a predicate per API over the image (the topic is
// there, the ACLs are, the quotas have these values...): thirteen of them,
// each restating the decision's outcome, and each needing a bound because
// a concurrent change by another client could keep it from ever holding.
// The offset says exactly "the records are applied here", for any API,
// and is reached unless this broker lags behind the log.

// untimedWait bounds step 6 for a request without a timeout of its own
// (CreateAcls, DeleteAcls, AlterClientQuotas, AlterUserScramCredentials):
// the bound those handlers always had. With an offset the wait outlasts it
// only when this broker lags; the answer then goes out without it rather
// than after the client has given up.
const untimedWait = 10 * time.Second

// forwarding is how forward treats one request. The zero value forwards
// the request whole under adminTimeout and answers with the controller's
// answer as it is.
type forwarding[Resp kmsg.Response] struct {
	// timeoutMs is the request's own timeout (adminCtx): 0 for none.
	timeoutMs int32
	// waitMax, if not 0, bounds step 6 within the timeout (untimedWait).
	waitMax time.Duration
	// prepare, if set, runs first in the goroutine and reports whether
	// anything is left to send; when not, the answer is the request's empty
	// response.
	prepare func() bool
	// complete, if set, checks the answer's shape (one result per part
	// sent); an answer that fails it is UNKNOWN_SERVER_ERROR for every part.
	complete func(Resp) bool
	// finish, if set, makes the client's answer of resp after the wait;
	// err, if not nil, is why the controller could not be reached (resp is
	// then the fallback).
	finish func(ctx context.Context, resp Resp, err error) kmsg.Response
}

// forward answers req through the active controller (steps 1-7 above).
// req is what is sent: the client's request, or the part of it this broker
// does not answer itself. Resp must be req's response type.
func forward[Resp kmsg.Response](b *Broker, cc *api.Conn, req kmsg.Request, f forwarding[Resp], respond func(kmsg.Response)) {
	b.goLoop(func() {
		ctx, cancel := adminCtx(cc.Ctx, f.timeoutMs)
		defer cancel()
		var (
			resp Resp
			err  error
		)
		if f.prepare == nil || f.prepare() {
			resp, err = forwardTo(ctx, b, req, f.waitMax, f.complete)
		} else {
			resp = req.ResponseKind().(Resp)
		}
		if f.finish == nil {
			respond(resp)
			return
		}
		respond(f.finish(ctx, resp, err))
	})
}

// forwardTo sends req to the active controller and returns its answer
// once this broker's image has the records the answer committed, or after
// waitMax (if not 0) or when ctx ends, whichever is first (steps 4-6).
// Without a usable answer it returns the fallback (step 5), and err when
// the controller could not be reached. complete, if set, checks the
// answer's shape.
func forwardTo[Resp kmsg.Response](ctx context.Context, b *Broker, req kmsg.Request, waitMax time.Duration, complete func(Resp) bool) (Resp, error) {
	kresp, offset, err := b.ctl.Call(ctx, req)
	if err != nil {
		return b.reg.ErrorResponse(req, kerr.RequestTimedOut.Code).(Resp), err
	}
	resp, ok := kresp.(Resp)
	if !ok || (complete != nil && !complete(resp)) {
		b.log.Warn().Str("request", kmsg.NameForKey(req.Key())).Str("answer", kmsg.NameForKey(kresp.Key())).
			Msg("the active controller's answer does not match the request: UNKNOWN_SERVER_ERROR")
		return b.reg.ErrorResponse(req, kerr.UnknownServerError.Code).(Resp), nil
	}
	wctx := ctx
	if waitMax > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, waitMax)
		defer cancel()
	}
	waitOffset(wctx, b.replicas, offset)
	return resp, nil
}

// waitOffset waits until the local replicas reflect the metadata image at
// offset or a later one, and reports whether they do; false when ctx ended
// first. Offset 0 (nothing committed) is reached at once.
func waitOffset(ctx context.Context, replicas *replicamgr.Manager, offset uint64) bool {
	if offset == 0 {
		return true
	}
	return replicas.WaitImage(ctx, func(img *controller.Image) bool { return img.Version() >= offset })
}

// scattering is the forwarding of a subset of a client's request: the
// parts at indexes at, the others answered here in resp, whose answers
// (one per part of the client's request) are into. The controller's answer
// must have one answer per part sent (parts gives them); each goes to its
// part's place in into, and the client gets resp.
func scattering[Resp kmsg.Response, Part any](resp kmsg.Response, into []Part, at []int, parts func(Resp) []Part) forwarding[Resp] {
	return forwarding[Resp]{
		complete: func(r Resp) bool { return len(parts(r)) == len(at) },
		finish: func(_ context.Context, r Resp, _ error) kmsg.Response {
			scatter(into, at, parts(r))
			return resp
		},
	}
}

// scatter puts the answers to a forwarded subset back in place: from[j]
// answers the part at index at[j] of the client's request, whose answers
// are into. REQUIRES: len(from) == len(at).
func scatter[T any](into []T, at []int, from []T) {
	for j, r := range from {
		into[at[j]] = r
	}
}
