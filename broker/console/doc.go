// Package console is the node's built-in web console: server-rendered
// pages (html/template, a small stylesheet and a little plain JavaScript,
// all embedded with go:embed) that show the cluster as this node sees it:
// brokers, the metadata quorum and the partitions that lack replicas;
// topics with their partitions, offsets and configs; the last records of a
// partition; consumer groups with their members, lag and rebalance
// timeline; and the connected clients.
//
// It only reads. The pages know the node through Source, a narrow
// interface, and hold nothing between requests. NodeSource implements it
// from the node's published state, given as the few parts it reads (the
// image, the replica manager, the group coordinator, the client servers);
// the broker builds one at start-up, and this package never imports the
// broker. Everything a visitor can make it hold is bounded: records tailed, bytes
// shown per value, clients listed, pages and tails rendered at once.
// Every byte that comes from a client (record keys, values, headers,
// client ids, group ids, topic names) reaches the page through
// html/template's escaping only, and the pages forbid inline scripts
// (Content-Security-Policy).
//
// HostFilter (host.go) stands in front of the pages: only requests whose
// Host header names the console are answered, so a web page cannot read
// it through DNS rebinding.
//
// Files:
//
//   - source.go: Source, and the values it returns (Cluster, Topic, Tail,
//     Group …).
//   - node.go: NodeSource, Source read from a node's parts: the metadata
//     image, the replicas' views and logs (Tail), the coordinator's groups
//     and offsets (lag against the local high watermark, per partition of
//     the topics the group subscribes to or committed to, computed by
//     package group/lag as `fjord group lag` computes it), the clients.
//   - console.go: Console, the pages and their handlers, with the bounds
//     on what a visitor can ask for; templates/ and static/ are embedded.
//   - decode.go: how a key, value or header is shown (JSON, text, hex).
//   - host.go: the Host check (Hosts, HostFilter) and AllowedHostsKey.
//   - listen.go: Listen, the console's listener: the Host check from the
//     bound address, served through broker/httpserve until the owner's
//     lifecycle.Group stops.
package console
