package compattests

// A namespaced network for the network fault tests (fault_netns_linux_test.go):
// n hosts, each a network namespace of its own with one address, joined
// by veth pairs to a bridge in a hub namespace the test made. The hub has
// an address on the bridge too and is where the test's clients dial from
// (netNS.DialContext), so nothing is added to the root namespace: every
// interface, address and rule lives in the test's own namespaces, and
// deleting them (t.Cleanup, or the next run's sweepStaleNetNS after a
// crash) removes everything.
//
//	hub (fjord-compat-<pid>-<k>): br0 10.201.0.254/24
//	 ├── h1 ── eth0 of host 1: 10.201.0.1/24
//	 ├── ...
//	 └── hN ── eth0 of host N: 10.201.0.N/24
//
// Faults are nftables rules in the hosts' namespaces (table inet
// fjord_nemesis, replaced whole at each change): a host that must not
// hear a peer drops the peer's packets on input (a black hole: no RST, no
// ICMP, as a pulled cable or a firewall's DROP), loss drops a share of
// them with `numgen random`. This kernel has neither sch_netem nor nft's
// own queue expression, so delay is an NFQUEUE (nfqueue_linux_test.go)
// fed by an iptables-nft NFQUEUE rule (nf_tables' xt compatibility) on
// the host's output to its peers.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// netLabSubnet is the hosts' /24; every lab has its own namespaces, so
// labs of parallel runs may all use it.
const netLabSubnet = "10.201.0."

// netLab is a namespaced network of hosts 1..n. Its rules state (deaf,
// loss, delayed) is what was last applied; apply is the one writer.
type netLab struct {
	t     testing.TB
	hub   *netNS
	hosts []*netNS // host i at [i-1]

	mu sync.Mutex
	// delayers are the NFQUEUE readers of hosts whose output is delayed.
	delayers map[int]*nfqDelay
	// current is the fault applied now (zero: none).
	current netFault
}

// netFault is the state of the network, as directed relations between
// hosts: deaf[a] lists the hosts a does not hear (a drops their packets),
// loss[a] the share (percent) of every peer's packets a drops, delay[a]
// whether a's packets to its peers are delayed by delayMin..delayMax.
type netFault struct {
	deaf map[int][]int
	// deafPort[a] lists the hosts whose TCP packets to or from port
	// (one service: say the client listener, which replication uses)
	// a drops, leaving their other traffic alone.
	deafPort           map[int][]int
	port               int
	loss               map[int]int
	delay              map[int]bool
	delayMin, delayMax time.Duration
}

// newNetLab makes the hub and n hosts. It skips (or fails, with
// FJORD_REQUIRE_NETNS) where namespaces cannot be made.
func newNetLab(t testing.TB, n int) *netLab {
	t.Helper()
	requireNetNS(t)
	for _, tool := range []string{"nft", "iptables-nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFailNetNS(t, fmt.Errorf("no %s command (nftables, iptables): %w", tool, err))
		}
	}
	lab := &netLab{t: t, delayers: map[int]*nfqDelay{}}
	lab.hub = newNetNS(t)
	// Registered after the namespaces' own clean-up, so it runs first:
	// the NFQUEUE readers stop before their namespaces go.
	t.Cleanup(lab.stopDelayers)
	lab.run(lab.hub, "ip", "link", "add", "br0", "type", "bridge")
	lab.run(lab.hub, "ip", "addr", "add", netLabSubnet+"254/24", "dev", "br0")
	lab.run(lab.hub, "ip", "link", "set", "br0", "up")
	for i := 1; i <= n; i++ {
		h := newNetNS(t)
		lab.hosts = append(lab.hosts, h)
		port := fmt.Sprintf("h%d", i)
		// Made inside the two namespaces at once: the root namespace
		// never holds either end.
		if out, err := exec.Command("ip", "link", "add", "eth0", "netns", h.Name(), "type", "veth",
			"peer", "name", port, "netns", lab.hub.Name()).CombinedOutput(); err != nil {
			t.Fatalf("veth pair for host %d: %v: %s", i, err, out)
		}
		lab.run(lab.hub, "ip", "link", "set", port, "master", "br0")
		lab.run(lab.hub, "ip", "link", "set", port, "up")
		lab.run(h, "ip", "addr", "add", lab.IP(i)+"/24", "dev", "eth0")
		lab.run(h, "ip", "link", "set", "eth0", "up")
	}
	return lab
}

// skipOrFailNetNS skips t for why, or fails it with FJORD_REQUIRE_NETNS.
func skipOrFailNetNS(t testing.TB, why error) {
	t.Helper()
	if requireNetNSSet() {
		t.Fatalf("FJORD_REQUIRE_NETNS is set but the namespaced network cannot be built: %v", why)
	}
	t.Skipf("namespaced network unavailable (%v); set FJORD_REQUIRE_NETNS=1 to make this a failure", why)
}

func requireNetNSSet() bool { return os.Getenv("FJORD_REQUIRE_NETNS") != "" }

func (lab *netLab) run(ns *netNS, name string, args ...string) {
	lab.t.Helper()
	if out, err := ns.Command(name, args...).CombinedOutput(); err != nil {
		lab.t.Fatalf("%s: %s %s: %v: %s", ns.Name(), name, strings.Join(args, " "), err, out)
	}
}

// N is the number of hosts.
func (lab *netLab) N() int { return len(lab.hosts) }

// IP is host i's address.
func (lab *netLab) IP(i int) string { return fmt.Sprintf("%s%d", netLabSubnet, i) }

// Host is host i's namespace.
func (lab *netLab) Host(i int) *netNS { return lab.hosts[i-1] }

// Hub is the namespace clients dial from.
func (lab *netLab) Hub() *netNS { return lab.hub }

// Apply replaces the network's faults with f: every host's rules, then
// the delayers the new state needs (started before their rules point
// packets at them, stopped after). An empty netFault heals everything.
func (lab *netLab) Apply(f netFault) error {
	lab.mu.Lock()
	defer lab.mu.Unlock()
	for i := 1; i <= lab.N(); i++ {
		if f.delay[i] && lab.delayers[i] == nil {
			d, err := startNFQDelay(lab.Host(i), nfqDelayQueue, f.delayMin, f.delayMax)
			if err != nil {
				return fmt.Errorf("host %d: delay: %w", i, err)
			}
			lab.delayers[i] = d
		}
	}
	// Every host at once, so the fault (and the heal) lands on all of them
	// within a few milliseconds rather than one after another.
	errs := make([]string, lab.N())
	var wg sync.WaitGroup
	for i := 1; i <= lab.N(); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := lab.applyHost(i, f); err != nil {
				errs[i-1] = fmt.Sprintf("host %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	errs = slices.DeleteFunc(errs, func(s string) bool { return s == "" })
	for i, d := range lab.delayers {
		if !f.delay[i] {
			d.Stop() // its rule is gone: it only releases what it holds
			delete(lab.delayers, i)
		}
	}
	lab.current = f
	if len(errs) > 0 {
		return fmt.Errorf("applying network faults: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Heal removes every fault.
func (lab *netLab) Heal() error { return lab.Apply(netFault{}) }

// applyHost writes host i's rules for f in one nft transaction (and its
// NFQUEUE rule through iptables-nft: see the file comment).
func (lab *netLab) applyHost(i int, f netFault) error {
	var in []string
	if deaf := f.deaf[i]; len(deaf) > 0 {
		in = append(in, fmt.Sprintf("ip saddr { %s } drop", lab.ipList(deaf)))
	}
	if deaf := f.deafPort[i]; len(deaf) > 0 {
		in = append(in, fmt.Sprintf("ip saddr { %s } tcp dport %d drop", lab.ipList(deaf), f.port),
			fmt.Sprintf("ip saddr { %s } tcp sport %d drop", lab.ipList(deaf), f.port))
	}
	if pct := f.loss[i]; pct > 0 {
		in = append(in, fmt.Sprintf("ip saddr { %s } numgen random mod 100 < %d drop", lab.ipList(lab.peers(i)), pct))
	}
	var script bytes.Buffer
	// Declaring the table first makes the delete succeed when it is absent.
	script.WriteString("table inet fjord_nemesis {}\ndelete table inet fjord_nemesis\n")
	if len(in) > 0 {
		fmt.Fprintf(&script, "table inet fjord_nemesis {\n  chain input {\n    type filter hook input priority 0; policy accept;\n    %s\n  }\n}\n",
			strings.Join(in, "\n    "))
	}
	cmd := lab.Host(i).Command("nft", "-f", "-")
	cmd.Stdin = &script
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %v: %s\n%s", err, out, script.String())
	}
	// The delay rule: flushed, then added again if wanted. The host's
	// namespace holds nothing else of iptables'.
	if out, err := lab.Host(i).Command("iptables-nft", "-F", "OUTPUT").CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-nft -F OUTPUT: %v: %s", err, out)
	}
	if f.delay[i] {
		args := []string{"-A", "OUTPUT", "-d", strings.ReplaceAll(lab.ipList(lab.peers(i)), " ", ""),
			"-j", "NFQUEUE", "--queue-num", fmt.Sprint(nfqDelayQueue), "--queue-bypass"}
		if out, err := lab.Host(i).Command("iptables-nft", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables-nft %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// peers are every host but i.
func (lab *netLab) peers(i int) []int {
	var out []int
	for j := 1; j <= lab.N(); j++ {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

func (lab *netLab) ipList(hosts []int) string {
	var ips []string
	for _, h := range hosts {
		ips = append(ips, lab.IP(h))
	}
	return strings.Join(ips, ", ")
}

// Rules returns host i's nftables ruleset as nft lists it (evidence).
func (lab *netLab) Rules(i int) string {
	out, err := lab.Host(i).Command("nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("nft list ruleset: %v: %s", err, out)
	}
	return string(out)
}

func (lab *netLab) stopDelayers() {
	lab.mu.Lock()
	defer lab.mu.Unlock()
	for i, d := range lab.delayers {
		d.Stop()
		delete(lab.delayers, i)
	}
}

// DelayStats sums what the delayers released (packets, and those whose
// verdict failed).
func (lab *netLab) DelayStats() (released, failed int64) {
	lab.mu.Lock()
	defer lab.mu.Unlock()
	for _, d := range lab.delayers {
		r, f := d.Stats()
		released += r
		failed += f
	}
	return
}

// Faults build netFaults over host ids.

// partition makes every host of each group deaf to every host of the
// other groups (hosts in no group hear and are heard by everyone).
func partition(groups ...[]int) netFault {
	f := netFault{deaf: map[int][]int{}}
	for gi, g := range groups {
		for gj, o := range groups {
			if gi == gj {
				continue
			}
			for _, a := range g {
				f.deaf[a] = append(f.deaf[a], o...)
			}
		}
	}
	for a := range f.deaf {
		slices.Sort(f.deaf[a])
	}
	return f
}

// portPartition is partition for the TCP traffic of one port only.
func portPartition(port int, groups ...[]int) netFault {
	f := partition(groups...)
	f.deafPort, f.deaf, f.port = f.deaf, nil, port
	return f
}

// oneWay makes every host in deafTo deaf to muted: muted hears them,
// they do not hear muted.
func oneWay(muted int, deafTo []int) netFault {
	f := netFault{deaf: map[int][]int{}}
	for _, a := range deafTo {
		f.deaf[a] = []int{muted}
	}
	return f
}

// lossy drops pct % of the packets every host in hosts receives from its
// peers.
func lossy(pct int, hosts []int) netFault {
	f := netFault{loss: map[int]int{}}
	for _, h := range hosts {
		f.loss[h] = pct
	}
	return f
}

// delayed holds every packet hosts send to their peers for a uniformly
// drawn min..max.
func delayed(min, max time.Duration, hosts []int) netFault {
	f := netFault{delay: map[int]bool{}, delayMin: min, delayMax: max}
	for _, h := range hosts {
		f.delay[h] = true
	}
	return f
}

// String describes f for the log.
func (f netFault) String() string {
	var parts []string
	keys := func(m map[int][]int) []int {
		var ks []int
		for k := range m {
			ks = append(ks, k)
		}
		sort.Ints(ks)
		return ks
	}
	for _, a := range keys(f.deaf) {
		parts = append(parts, fmt.Sprintf("%d hears not %v", a, f.deaf[a]))
	}
	for _, a := range keys(f.deafPort) {
		parts = append(parts, fmt.Sprintf("%d hears not %v on port %d", a, f.deafPort[a], f.port))
	}
	for h, p := range f.loss {
		parts = append(parts, fmt.Sprintf("%d drops %d%%", h, p))
	}
	var del []int
	for h, on := range f.delay {
		if on {
			del = append(del, h)
		}
	}
	if len(del) > 0 {
		sort.Ints(del)
		parts = append(parts, fmt.Sprintf("%v delayed %v..%v", del, f.delayMin, f.delayMax))
	}
	if len(parts) == 0 {
		return "healed"
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
