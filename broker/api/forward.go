package api

import (
	"context"
	"fmt"
	"time"

	"github.com/fjordlog/fjord/protocol/fjordmsg"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Forwarding: the admin requests that change cluster metadata (topics,
// partitions, elections, reassignments, configs, quotas, SCRAM
// credentials, ACLs) are decided by the active controller. The broker a
// client asked sends the request there and answers once its own image
// shows the outcome, so a client that made a change here sees it here at
// once. Forward is that sequence, the same for every such API, in every
// room:
//
//  1. a tracked goroutine (Forwarder.Go): the connection's reader must
//     not wait;
//  2. the request's context, bounded by its timeout (AdminCtx);
//  3. Prepare, if set: checks that answer parts of the request here and
//     are too slow for the reader (the descriptor budget);
//  4. the call to the active controller (Forwarder.CallController:
//     in-process, or over the CONTROLLER listener, retried while there is
//     none);
//  5. the fallback when there is no usable answer: the key's error
//     response (Forwarder.ErrorResponse, from the registry),
//     REQUEST_TIMED_OUT for a controller that could not be reached,
//     UNKNOWN_SERVER_ERROR for an answer of another type or shape;
//  6. the wait until this broker's image reaches the metadata offset at
//     which the controller committed the answer's records
//     (Forwarder.WaitOffset), and then every other live broker's
//     (Forwarder.WaitPeers: read-your-writes across the cluster), bounded
//     by the request's timeout and WaitMax; the brokers still behind at
//     the bound are named in the answer (NoteLagging) and the log;
//  7. Finish, if set: the handler's own step (the answers to a forwarded
//     subset put back among those given here, Scattering; what the broker
//     adds itself), then respond.
//
// ForwardTo is steps 4-6, for callers that are not a handler's goroutine.
//
// Step 6 used to be a predicate per API over the image (the topic is
// there, the ACLs are, the quotas have these values...): thirteen of them,
// each restating the decision's outcome, and each needing a bound because
// a concurrent change by another client could keep it from ever holding.
// The offset says exactly "the records are applied here", for any API,
// and is reached unless this broker lags behind the log.

// Forwarder is what forwarding needs of the node.
type Forwarder interface {
	// Go runs fn on a goroutine the node tracks; false once it is closing.
	Go(fn func()) bool
	// CallController sends req to the active controller and returns its
	// answer and the metadata offset its records committed at (0: none).
	CallController(ctx context.Context, req kmsg.Request) (kmsg.Response, uint64, error)
	// ErrorResponse answers req with code (the registry's).
	ErrorResponse(req kmsg.Request, code int16) kmsg.Response
	// WaitOffset waits until this node's image is at offset or later, or
	// ctx ends.
	WaitOffset(ctx context.Context, offset uint64) bool
	// WaitPeers waits until every other live broker's image is at offset
	// or later, or ctx ends, and returns those that were not (nil: all).
	WaitPeers(ctx context.Context, offset uint64) []int32
	Log() *zerolog.Logger
}

// UntimedWait bounds step 6 for a request without a timeout of its own
// (CreateAcls, DeleteAcls, AlterClientQuotas, AlterUserScramCredentials):
// the bound those handlers always had. With an offset the wait outlasts it
// only when this broker lags; the answer then goes out without it rather
// than after the client has given up.
const UntimedWait = 10 * time.Second

// AdminTimeout bounds an admin request whose client gave no timeout.
const AdminTimeout = 30 * time.Second

// AdminCtx is an admin request's context: its own timeout when it has one
// below AdminTimeout, else AdminTimeout.
func AdminCtx(parent context.Context, timeoutMs int32) (context.Context, context.CancelFunc) {
	d := AdminTimeout
	if timeoutMs > 0 && time.Duration(timeoutMs)*time.Millisecond < d {
		d = time.Duration(timeoutMs) * time.Millisecond
	}
	return context.WithTimeout(parent, d)
}

// Forwarding is how Forward treats one request. The zero value forwards
// the request whole under AdminTimeout and answers with the controller's
// answer as it is.
type Forwarding[Resp kmsg.Response] struct {
	// TimeoutMs is the request's own timeout (AdminCtx): 0 for none.
	TimeoutMs int32
	// WaitMax, if not 0, bounds step 6 within the timeout (UntimedWait).
	WaitMax time.Duration
	// Prepare, if set, runs first in the goroutine and reports whether
	// anything is left to send; when not, the answer is the request's empty
	// response.
	Prepare func() bool
	// Complete, if set, checks the answer's shape (one result per part
	// sent); an answer that fails it is UNKNOWN_SERVER_ERROR for every part.
	Complete func(Resp) bool
	// Finish, if set, makes the client's answer of resp after the wait;
	// err, if not nil, is why the controller could not be reached (resp is
	// then the fallback).
	Finish func(ctx context.Context, resp Resp, err error) kmsg.Response
}

// Forward answers req through the active controller (steps 1-7 above).
// req is what is sent: the client's request, or the part of it this broker
// does not answer itself. Resp must be req's response type.
func Forward[Resp kmsg.Response](fw Forwarder, cc *Conn, req kmsg.Request, f Forwarding[Resp], respond func(kmsg.Response)) {
	fw.Go(func() {
		ctx, cancel := AdminCtx(cc.Ctx, f.TimeoutMs)
		defer cancel()
		var (
			resp Resp
			err  error
		)
		if f.Prepare == nil || f.Prepare() {
			resp, err = ForwardTo(ctx, fw, req, f.WaitMax, f.Complete)
		} else {
			resp = req.ResponseKind().(Resp)
		}
		if f.Finish == nil {
			respond(resp)
			return
		}
		respond(f.Finish(ctx, resp, err))
	})
}

// ForwardTo sends req to the active controller and returns its answer
// once this broker's image has the records the answer committed, or after
// waitMax (if not 0) or when ctx ends, whichever is first (steps 4-6).
// Without a usable answer it returns the fallback (step 5), and err when
// the controller could not be reached. complete, if set, checks the
// answer's shape.
func ForwardTo[Resp kmsg.Response](ctx context.Context, fw Forwarder, req kmsg.Request, waitMax time.Duration, complete func(Resp) bool) (Resp, error) {
	kresp, offset, err := fw.CallController(ctx, req)
	if err != nil {
		return fw.ErrorResponse(req, kerr.RequestTimedOut.Code).(Resp), err
	}
	resp, ok := kresp.(Resp)
	if !ok || (complete != nil && !complete(resp)) {
		fw.Log().Warn().Str("request", fjordmsg.AnyNameForKey(req.Key())).Str("answer", fjordmsg.AnyNameForKey(kresp.Key())).
			Msg("the active controller's answer does not match the request: UNKNOWN_SERVER_ERROR")
		return fw.ErrorResponse(req, kerr.UnknownServerError.Code).(Resp), nil
	}
	wctx := ctx
	if waitMax > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, waitMax)
		defer cancel()
	}
	if fw.WaitOffset(wctx, offset) {
		if lagging := fw.WaitPeers(wctx, offset); len(lagging) > 0 {
			fw.Log().Warn().Str("request", fjordmsg.AnyNameForKey(req.Key())).Uint64("offset", offset).Ints32("brokers", lagging).
				Msg("answering a metadata change before these live brokers applied it (request timeout); they apply it when they catch up")
			NoteLagging(resp, lagging)
		}
	}
	return resp, nil
}

// NoteLagging says in resp, on each part that succeeded and has an error
// message, that the brokers lagging had not applied the change when the
// answer went out. The change is committed, so the part stays a success:
// an error would have the client retry a done change (and get
// TOPIC_ALREADY_EXISTS); the message tells an operator who reads it why
// another broker may not show the change yet. Answers without a message
// field keep only the log line.
func NoteLagging(resp kmsg.Response, lagging []int32) {
	msg := fmt.Sprintf("committed, but brokers %v had not applied it within the request timeout", lagging)
	note := func(code int16, m **string) {
		if code == 0 && *m == nil {
			*m = &msg
		}
	}
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		for i := range r.Topics {
			note(r.Topics[i].ErrorCode, &r.Topics[i].ErrorMessage)
		}
	case *kmsg.DeleteTopicsResponse:
		for i := range r.Topics {
			note(r.Topics[i].ErrorCode, &r.Topics[i].ErrorMessage)
		}
	case *kmsg.CreatePartitionsResponse:
		for i := range r.Topics {
			note(r.Topics[i].ErrorCode, &r.Topics[i].ErrorMessage)
		}
	case *kmsg.AlterConfigsResponse:
		for i := range r.Resources {
			note(r.Resources[i].ErrorCode, &r.Resources[i].ErrorMessage)
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for i := range r.Resources {
			note(r.Resources[i].ErrorCode, &r.Resources[i].ErrorMessage)
		}
	case *kmsg.CreateACLsResponse:
		for i := range r.Results {
			note(r.Results[i].ErrorCode, &r.Results[i].ErrorMessage)
		}
	case *kmsg.DeleteACLsResponse:
		for i := range r.Results {
			note(r.Results[i].ErrorCode, &r.Results[i].ErrorMessage)
		}
	case *kmsg.AlterClientQuotasResponse:
		for i := range r.Entries {
			note(r.Entries[i].ErrorCode, &r.Entries[i].ErrorMessage)
		}
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		for i := range r.Results {
			note(r.Results[i].ErrorCode, &r.Results[i].ErrorMessage)
		}
	}
}

// Scattering is the forwarding of a subset of a client's request: the
// parts at indexes at, the others answered here in resp, whose answers
// (one per part of the client's request) are into. The controller's answer
// must have one answer per part sent (parts gives them); each goes to its
// part's place in into, and the client gets resp.
func Scattering[Resp kmsg.Response, Part any](resp kmsg.Response, into []Part, at []int, parts func(Resp) []Part) Forwarding[Resp] {
	return Forwarding[Resp]{
		Complete: func(r Resp) bool { return len(parts(r)) == len(at) },
		Finish: func(_ context.Context, r Resp, _ error) kmsg.Response {
			Scatter(into, at, parts(r))
			return resp
		},
	}
}

// Scatter puts the answers to a forwarded subset back in place: from[j]
// answers the part at index at[j] of the client's request, whose answers
// are into. REQUIRES: len(from) == len(at).
func Scatter[T any](into []T, at []int, from []T) {
	for j, r := range from {
		into[at[j]] = r
	}
}
