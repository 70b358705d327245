package compattests

// The namespaced network's own test: each fault does to TCP between two
// hosts what it says (a cut connection times out, a one-way cut blocks
// the deaf side's connection, loss slows it, delay adds 100-300 ms per
// hop), and healing restores it. Without it, a fault test passing under
// a nemesis that does nothing would prove nothing.

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"
)

func TestNetLab(t *testing.T) {
	lab := newNetLab(t, 3)
	// An echo server on host 2 (and one on host 3 for the one-way cut).
	for _, h := range []int{2, 3} {
		ln, err := lab.Host(h).Listen(net.JoinHostPort(lab.IP(h), "7000"))
		if err != nil {
			t.Fatalf("listen on host %d: %v", h, err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					r := bufio.NewReader(c)
					for {
						l, err := r.ReadString('\n')
						if err != nil {
							return
						}
						if _, err := c.Write([]byte(l)); err != nil {
							return
						}
					}
				}()
			}
		}()
	}
	// rtt dials host to from host from and times round trips of a line
	// (the median of n), or returns an error.
	rtt := func(from, to, n int) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := lab.Host(from).DialContext(ctx, "tcp", net.JoinHostPort(lab.IP(to), "7000"))
		if err != nil {
			return 0, err
		}
		defer c.Close()
		r := bufio.NewReader(c)
		var ds []time.Duration
		for range n {
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			start := time.Now()
			if _, err := c.Write([]byte("ping\n")); err != nil {
				return 0, err
			}
			if _, err := r.ReadString('\n'); err != nil {
				return 0, err
			}
			ds = append(ds, time.Since(start))
		}
		for i := range ds { // sort (insertion; n is small)
			for j := i; j > 0 && ds[j] < ds[j-1]; j-- {
				ds[j], ds[j-1] = ds[j-1], ds[j]
			}
		}
		return ds[len(ds)/2], nil
	}
	apply := func(f netFault) {
		t.Helper()
		if err := lab.Apply(f); err != nil {
			t.Fatal(err)
		}
		t.Logf("network: %s", f)
	}

	// From the hub too: clients reach every host.
	// A host's link may take a moment to pass traffic after the lab is
	// made (a dial once failed after 1 s in CI): hosts with a server are
	// dialled until 5 s have passed, a second apart at most.
	dialHub := func(h int) (net.Conn, error) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			c, err := lab.Hub().DialContext(ctx, "tcp", net.JoinHostPort(lab.IP(h), "7000"))
			cancel()
			if err == nil || h == 1 || time.Now().After(deadline) {
				return c, err
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for h := 1; h <= 3; h++ {
		c, err := dialHub(h)
		if h == 1 {
			if err == nil {
				c.Close()
				t.Errorf("host 1 has no server, yet a dial to it succeeded")
			}
			continue
		}
		if err != nil {
			t.Fatalf("hub to host %d: %v", h, err)
		}
		c.Close()
	}
	if d, err := rtt(1, 2, 5); err != nil || d > 50*time.Millisecond {
		t.Fatalf("healthy network: rtt 1→2 %v, err %v", d, err)
	}

	apply(partition([]int{1}, []int{2, 3}))
	if _, err := rtt(1, 2, 1); err == nil {
		t.Errorf("partition: host 1 still reaches host 2")
	}
	if d, err := rtt(3, 2, 3); err != nil {
		t.Errorf("partition: hosts 2 and 3 on one side: %v (rtt %v)", err, d)
	}
	if lab.Rules(1) == "" {
		t.Errorf("no rules on host 1")
	}

	// Host 2 hears 3, 3 does not hear 2: no TCP connection either way,
	// but 1 still reaches both.
	apply(oneWay(2, []int{3}))
	if _, err := rtt(3, 2, 1); err == nil {
		t.Errorf("one-way: host 3 connected to host 2, whose answers it should not hear")
	}
	if _, err := rtt(1, 3, 1); err != nil {
		t.Errorf("one-way: host 1 to 3: %v", err)
	}

	apply(delayed(100*time.Millisecond, 300*time.Millisecond, []int{1, 2}))
	if d, err := rtt(1, 2, 9); err != nil || d < 200*time.Millisecond || d > 700*time.Millisecond {
		t.Errorf("delay 100-300ms each way: median rtt 1→2 %v (want 200ms-600ms), err %v", d, err)
	} else {
		t.Logf("delayed: median rtt 1→2 %v", d)
	}
	released, failed := lab.DelayStats()
	if released == 0 || failed > 0 {
		t.Errorf("delayers released %d packets, %d failed", released, failed)
	}

	apply(lossy(30, []int{1, 2}))
	start := time.Now()
	d, err := rtt(1, 2, 20)
	t.Logf("30%% loss: 20 round trips in %v (median %v), err %v", time.Since(start), d, err)

	apply(netFault{})
	if d, err := rtt(1, 2, 5); err != nil || d > 50*time.Millisecond {
		t.Fatalf("healed: rtt 1→2 %v, err %v", d, err)
	}
	if d, err := rtt(3, 2, 5); err != nil || d > 50*time.Millisecond {
		t.Fatalf("healed: rtt 3→2 %v, err %v", d, err)
	}
}
