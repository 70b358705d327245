package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol/fjordmsg"
)

// imageAt is an image at metadata version v.
func imageAt(t *testing.T, v uint64) *controller.Image {
	t.Helper()
	val := fmt.Sprint(v)
	img, err := (&controller.Image{}).Apply(v, controller.NewRecord(controller.SetConfig{
		Resource: controller.ConfigResource{Type: controller.ResourceBroker}, Key: "x", Value: &val}))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// cannedController is an active controller in this process that answers
// every request with answer(req), committed at offset, and records what
// it was asked.
type cannedController struct {
	answer func(kmsg.Request) kmsg.Response
	offset uint64
	asked  []kmsg.Request
}

func (c *cannedController) Image() *controller.Image { return nil }
func (c *cannedController) WaitFor(context.Context, func(*controller.Image) bool) error {
	return nil
}
func (c *cannedController) Leader() int32 { return 7 }
func (c *cannedController) Close() error  { return nil }
func (c *cannedController) Serve()        {}
func (c *cannedController) Call(_ context.Context, req kmsg.Request) (kmsg.Response, uint64) {
	c.asked = append(c.asked, req)
	return c.answer(req), c.offset
}

// forwardingBroker is node 7, the active controller in-process, which
// answers with answer committed at offset; the local replicas match an
// image at version at.
func forwardingBroker(t *testing.T, answer func(kmsg.Request) kmsg.Response, offset, at uint64) (*Broker, *cannedController) {
	t.Helper()
	actl := &cannedController{answer: answer, offset: offset}
	cfg := config.Default()
	cfg.NodeID = 7
	b := &Broker{cfg: cfg, meta: actl, actl: actl, log: zerolog.Nop()}
	b.reg = newRegistry(b)
	b.ctl = newCtlClient(b)
	withImage(b, imageAt(t, at))
	return b, actl
}

// publish makes img the image the local replicas match, as publishLoop
// does.
func publish(b *Broker, img *controller.Image) { b.replicas.Apply(img) }

// answered is a respond that hands the answer to a channel.
func answered() (func(kmsg.Response), chan kmsg.Response) {
	ch := make(chan kmsg.Response, 1)
	return func(r kmsg.Response) { ch <- r }, ch
}

// notYet fails if an answer is there. REQUIRES: synctest.Wait just
// returned.
func notYet(t *testing.T, ch chan kmsg.Response, when string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: answered already: %+v", when, r)
	default:
	}
}

func electAnswer(kmsg.Request) kmsg.Response {
	r := kmsg.NewPtrElectLeadersResponse()
	rt := kmsg.NewElectLeadersResponseTopic()
	rt.Topic = "t"
	r.Topics = append(r.Topics, rt)
	return r
}

// The answer waits until this broker's image reaches the offset the
// controller committed it at; an answer that committed nothing waits for
// nothing.
func TestForwardWaitsForOffset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := forwardingBroker(t, electAnswer, 8, 5)
		respond, got := answered()
		req := kmsg.NewPtrElectLeadersRequest()
		api.Forward(forwarder{b}, &api.Conn{Ctx: t.Context()}, req, api.Forwarding[*kmsg.ElectLeadersResponse]{TimeoutMs: 30_000}, respond)
		synctest.Wait()
		notYet(t, got, "image at 5")
		publish(b, imageAt(t, 7))
		synctest.Wait()
		notYet(t, got, "image at 7")
		publish(b, imageAt(t, 9))
		synctest.Wait()
		select {
		case r := <-got:
			if r := r.(*kmsg.ElectLeadersResponse); r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Topic != "t" {
				t.Fatalf("answer: %+v", r)
			}
		default:
			t.Fatal("image past the offset, no answer")
		}

		b, _ = forwardingBroker(t, electAnswer, 0, 5)
		respond, got = answered()
		api.Forward(forwarder{b}, &api.Conn{Ctx: t.Context()}, req, api.Forwarding[*kmsg.ElectLeadersResponse]{}, respond)
		synctest.Wait()
		if len(got) != 1 {
			t.Fatal("nothing committed, yet no answer")
		}
	})
}

// A broker whose image lags answers after waitMax, or the request's
// timeout, whichever is first, with the controller's answer.
func TestForwardWaitBounded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		timeoutMs int32
		waitMax   time.Duration
		after     time.Duration
	}{
		{"waitMax", 0, api.UntimedWait, api.UntimedWait},
		{"request timeout", 1500, api.UntimedWait, 1500 * time.Millisecond},
		{"AdminTimeout", 0, 0, api.AdminTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, _ := forwardingBroker(t, electAnswer, 8, 5)
				respond, got := answered()
				start := time.Now()
				api.Forward(forwarder{b}, &api.Conn{Ctx: t.Context()}, kmsg.NewPtrElectLeadersRequest(),
					api.Forwarding[*kmsg.ElectLeadersResponse]{TimeoutMs: tc.timeoutMs, WaitMax: tc.waitMax}, respond)
				r := (<-got).(*kmsg.ElectLeadersResponse)
				if took := time.Since(start); took != tc.after || len(r.Topics) != 1 {
					t.Fatalf("answered after %v (want %v): %+v", took, tc.after, r)
				}
			})
		})
	}
}

// Without a usable answer the client gets the key's error response:
// REQUEST_TIMED_OUT when no controller answered (finish learns why),
// UNKNOWN_SERVER_ERROR for an answer of another type or shape. With
// nothing left to send, nothing is sent.
func TestForwardFallback(t *testing.T) {
	twoCreations := func() *kmsg.CreateACLsRequest {
		req := kmsg.NewPtrCreateACLsRequest()
		req.Creations = make([]kmsg.CreateACLsRequestCreation, 2)
		return req
	}
	oneResult := func(kmsg.Request) kmsg.Response {
		r := kmsg.NewPtrCreateACLsResponse()
		r.Results = make([]kmsg.CreateACLsResponseResult, 1)
		return r
	}
	complete := func(req *kmsg.CreateACLsRequest) func(*kmsg.CreateACLsResponse) bool {
		return func(r *kmsg.CreateACLsResponse) bool { return len(r.Results) == len(req.Creations) }
	}
	for _, tc := range []struct {
		name     string
		answer   func(kmsg.Request) kmsg.Response
		complete bool
		code     int16
		err      bool
	}{
		{"no controller", func(kmsg.Request) kmsg.Response { return nil }, false, kerr.RequestTimedOut.Code, true},
		{"another type", electAnswer, false, kerr.UnknownServerError.Code, false},
		{"another shape", oneResult, true, kerr.UnknownServerError.Code, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, _ := forwardingBroker(t, tc.answer, 8, 5)
				req := twoCreations()
				f := api.Forwarding[*kmsg.CreateACLsResponse]{}
				if tc.complete {
					f.Complete = complete(req)
				}
				var finishErr error
				f.Finish = func(_ context.Context, resp *kmsg.CreateACLsResponse, err error) kmsg.Response {
					finishErr = err
					return resp
				}
				respond, got := answered()
				api.Forward(forwarder{b}, &api.Conn{Ctx: t.Context()}, req, f, respond)
				r := (<-got).(*kmsg.CreateACLsResponse)
				if len(r.Results) != 2 || r.Results[0].ErrorCode != tc.code || r.Results[1].ErrorCode != tc.code {
					t.Fatalf("answer: %+v", r.Results)
				}
				if (finishErr != nil) != tc.err || (tc.err && !errors.Is(finishErr, context.DeadlineExceeded)) {
					t.Fatalf("finish got error %v", finishErr)
				}
			})
		})
	}

	synctest.Test(t, func(t *testing.T) {
		b, actl := forwardingBroker(t, oneResult, 8, 5)
		respond, got := answered()
		api.Forward(forwarder{b}, &api.Conn{Ctx: t.Context()}, twoCreations(), api.Forwarding[*kmsg.CreateACLsResponse]{
			Prepare: func() bool { return false }}, respond)
		if r := (<-got).(*kmsg.CreateACLsResponse); len(r.Results) != 0 || len(actl.asked) != 0 {
			t.Fatalf("nothing to send: %+v, %d asked", r, len(actl.asked))
		}
	})
}

// A forwarded subset's answers go back to their parts' places among the
// answers given here; an answer with another number of parts is
// UNKNOWN_SERVER_ERROR for each part sent.
func TestForwardScattering(t *testing.T) {
	answerCodes := func(codes ...int16) func(kmsg.Request) kmsg.Response {
		return func(kmsg.Request) kmsg.Response {
			r := kmsg.NewPtrCreateACLsResponse()
			for _, c := range codes {
				rr := kmsg.NewCreateACLsResponseResult()
				rr.ErrorCode = c
				r.Results = append(r.Results, rr)
			}
			return r
		}
	}
	const here = 42 // answered by the broker itself
	usErr := kerr.UnknownServerError.Code
	for _, tc := range []struct {
		name   string
		answer func(kmsg.Request) kmsg.Response
		want   []int16
	}{
		{"in place", answerCodes(0, 7), []int16{0, here, 7}},
		{"too few", answerCodes(0), []int16{usErr, here, usErr}},
		{"too many", answerCodes(0, 7, 7), []int16{usErr, here, usErr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, _ := forwardingBroker(t, tc.answer, 0, 5)
				resp := kmsg.NewPtrCreateACLsResponse()
				resp.Results = make([]kmsg.CreateACLsResponseResult, 3)
				resp.Results[1].ErrorCode = here
				fwd := kmsg.NewPtrCreateACLsRequest()
				fwd.Creations = make([]kmsg.CreateACLsRequestCreation, 2)
				respond, got := answered()
				api.Forward(forwarder{b}, &api.Conn{Ctx: t.Context()}, fwd, api.Scattering(resp, resp.Results, []int{0, 2},
					func(r *kmsg.CreateACLsResponse) []kmsg.CreateACLsResponseResult { return r.Results }), respond)
				var codes []int16
				for _, r := range (<-got).(*kmsg.CreateACLsResponse).Results {
					codes = append(codes, r.ErrorCode)
				}
				if fmt.Sprint(codes) != fmt.Sprint(tc.want) {
					t.Fatalf("codes %v, want %v", codes, tc.want)
				}
			})
		})
	}
}

// The offset crosses the CONTROLLER listener in a tagged field, which only
// flexible versions carry: every key a broker forwards there must be
// flexible at the listener's highest version, which is the version a
// broker sends (kgo sends the highest both ends serve, and kmsg knows
// them all), and must have an error response for forward's fallback.
func TestForwardedVersionsFlexible(t *testing.T) {
	for _, key := range []int16{19, 20, 30, 31, 33, 37, 43, 44, 45, 46, 49, 51} {
		a := newRegistry(nil).Get(key)
		if a == nil || !a.Controller.Served || a.CtlLocal || a.ErrorResponse == nil {
			t.Errorf("key %d: not answered by the controller role with an error response", key)
			continue
		}
		req := fjordmsg.AnyRequestForKey(key)
		if req.MaxVersion() < a.Controller.Max {
			t.Errorf("key %d: kmsg knows v%d, the listener serves v%d", key, req.MaxVersion(), a.Controller.Max)
		}
		req.SetVersion(a.Controller.Max)
		if !req.IsFlexible() {
			t.Errorf("key %d: v%d, the listener's highest, is not flexible", key, a.Controller.Max)
		}
	}
}
