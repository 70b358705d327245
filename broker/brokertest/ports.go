package brokertest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports the harness names before a node binds them (metrics, console,
// replication and controller listeners, and the same ports again at a
// restart) come from below the kernel's ephemeral range. A port that
// bind(":0") found free and that was closed for a node to take can be
// handed by the kernel to the next ":0" listener (a link proxy of this
// very cluster) or to an outgoing connection before the node binds it:
// the node then serves without its metrics listener, and a scrape meets
// a proxy that forwards to a Kafka port (a CI run saw GET /metrics end
// in EOF that way). Below the ephemeral range only explicit binds take
// ports, so a port stays free between here and the node's bind unless
// another process picks the same one at random in that window.
var ports struct {
	sync.Mutex
	given map[int]bool // never handed out twice in this process
}

// portFloor is the lowest port freePort hands out.
const portFloor = 20000

func freePort() (int, error) {
	ceil := ephemeralLow()
	if ceil-portFloor < 1000 {
		return kernelPort()
	}
	ports.Lock()
	defer ports.Unlock()
	if ports.given == nil {
		ports.given = map[int]bool{}
	}
	for range 500 {
		p := portFloor + rand.IntN(ceil-portFloor)
		if ports.given[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		ln.Close()
		ports.given[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port in [%d, %d) after 500 tries", portFloor, ceil)
}

// freeAddr is freePort as a loopback host:port.
func freeAddr() (string, error) {
	p, err := freePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// ephemeralLow is the low end of the kernel's ephemeral port range, or
// 0 where it cannot be read (freePort then falls back to the kernel's
// choice).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 0
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return lo
}

func kernelPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, errors.Join(errors.New("free port"), err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
