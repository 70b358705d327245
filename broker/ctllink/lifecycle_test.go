package ctllink

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/controller"
)

// caughtUp is a replica manager that has applied version 40 and reflects
// every image asked for at once.
type caughtUp struct{}

func (caughtUp) AppliedVersion() uint64 { return 40 }
func (caughtUp) WaitImage(context.Context, func(*controller.Image) bool) bool {
	return true
}

// A broker registers, heartbeats until unfenced, is ready once, and on
// Shutdown asks to shut down until the controller agrees.
func TestLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var heartbeats []*kmsg.BrokerHeartbeatRequest
		c, _ := cannedClient(func(kreq kmsg.Request) kmsg.Response {
			switch req := kreq.(type) {
			case *kmsg.BrokerRegistrationRequest:
				r := kmsg.NewPtrBrokerRegistrationResponse()
				r.BrokerEpoch = 12
				return r
			case *kmsg.BrokerHeartbeatRequest:
				mu.Lock()
				heartbeats = append(heartbeats, req)
				n := len(heartbeats)
				mu.Unlock()
				r := kmsg.NewPtrBrokerHeartbeatResponse()
				r.IsFenced = n < 3 // unfenced at the third
				r.ShouldShutdown = req.WantShutdown
				return r
			}
			return nil
		})
		ready := 0
		l := NewLifecycle(LifecycleConfig{Client: c, Registration: registration, Replicas: caughtUp{},
			MetadataVersion: func() uint64 { return 40 }, Ready: func() { ready++ }, Logger: zerolog.Nop()})
		if l.Epoch() != 0 {
			t.Fatalf("epoch %d before registering", l.Epoch())
		}
		l.Shutdown() // never registered: nothing to ask, returns at once

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.Run(ctx)
		}()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if ready != 1 || l.Epoch() != 12 || l.Fenced() {
			t.Fatalf("after 10s: ready %d times, epoch %d, fenced %v", ready, l.Epoch(), l.Fenced())
		}
		mu.Lock()
		for _, hb := range heartbeats {
			if hb.BrokerEpoch != 12 || hb.CurrentMetadataOffset != 40 || hb.WantShutdown {
				t.Fatalf("heartbeat: %+v", hb)
			}
		}
		mu.Unlock()

		l.Shutdown()
		<-done // Run returns once the controller agreed
		mu.Lock()
		defer mu.Unlock()
		if last := heartbeats[len(heartbeats)-1]; !last.WantShutdown {
			t.Fatalf("last heartbeat did not ask to shut down: %+v", last)
		}
	})
}

// appliesLater is a replica manager that applies version 12 (the
// broker's registration, in TestLifecycleFirstHeartbeatCaughtUp) only
// when apply is called; until then it is at 11.
type appliesLater struct {
	mu      sync.Mutex
	v       uint64
	applied chan struct{}
}

func (a *appliesLater) AppliedVersion() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.v
}

func (a *appliesLater) apply() {
	a.mu.Lock()
	a.v = 12
	a.mu.Unlock()
	close(a.applied)
}

// WaitImage reflects every image asked for once version 12 is applied.
func (a *appliesLater) WaitImage(ctx context.Context, _ func(*controller.Image) bool) bool {
	select {
	case <-a.applied:
		return true
	case <-ctx.Done():
		return false
	}
}

// A starting broker's first heartbeat waits until its replicas have
// applied its own registration, so that the controller, which unfences a
// broker caught up to its registration, unfences it with that heartbeat
// rather than with one a fast interval later.
func TestLifecycleFirstHeartbeatCaughtUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var offsets []int64
		c, _ := cannedClient(func(kreq kmsg.Request) kmsg.Response {
			switch req := kreq.(type) {
			case *kmsg.BrokerRegistrationRequest:
				r := kmsg.NewPtrBrokerRegistrationResponse()
				r.BrokerEpoch = 12
				return r
			case *kmsg.BrokerHeartbeatRequest:
				mu.Lock()
				offsets = append(offsets, req.CurrentMetadataOffset)
				mu.Unlock()
				r := kmsg.NewPtrBrokerHeartbeatResponse()
				r.IsCaughtUp = req.CurrentMetadataOffset >= 12 // as controller.DecideHeartbeat
				r.IsFenced = !r.IsCaughtUp
				r.ShouldShutdown = req.WantShutdown
				return r
			}
			return nil
		})
		reps := &appliesLater{v: 11, applied: make(chan struct{})}
		ready := 0
		l := NewLifecycle(LifecycleConfig{Client: c, Registration: registration, Replicas: reps,
			MetadataVersion: func() uint64 { return 12 }, Ready: func() { ready++ }, Logger: zerolog.Nop()})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.Run(ctx)
		}()
		time.Sleep(30 * time.Millisecond) // the publish loop applies the registration
		reps.apply()
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		got := append([]int64(nil), offsets...)
		mu.Unlock()
		if len(got) == 0 || got[0] != 12 || ready != 1 || l.Fenced() {
			t.Fatalf("heartbeat offsets %v (want the first at 12), ready %d times, fenced %v", got, ready, l.Fenced())
		}
		cancel()
		<-done
	})
}
