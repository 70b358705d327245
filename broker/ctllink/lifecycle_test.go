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
