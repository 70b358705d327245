// Package protocol is Fjord's Kafka wire front end: size-prefixed frames,
// request and response headers (v0–v2, flexible versions with tagged fields),
// decoding request bodies into kmsg types, and the per-connection pipeline that
// lets handlers finish out of order while responses leave in request order.
//
// It knows nothing of partitions or topics: a Handler gets a decoded request
// and answers it through a Responder, now or later.
// A handler may also mute the connection (Request.Mute: the reader takes
// no further request for a while, KIP-219 throttling), and the server may
// refuse a connection as it is accepted (ServerConfig.Admit: connection
// counts and rates). Request memory is bounded (limits.go): a frame's
// buffer grows as its bytes arrive, under a budget shared by connections.
// Each connection keeps a small record of its client (clients.go: software
// name and version, API versions used, principal, the last errors a handler
// noted), which Server.Clients lists.
//
// Frame layout (all integers big-endian):
//
//	request:  int32 size | int16 api_key | int16 api_version | int32 correlation_id
//	          | nullable_string client_id (header v1+) | tagged_fields (header v2) | body
//	response: int32 size | int32 correlation_id | tagged_fields (header v1) | body
//
// A request uses header v2 when its body version is flexible, else v1
// (ControlledShutdown v0 alone used v0). Responses use header v1 when flexible,
// except ApiVersions, whose response header is always v0 so that a client can
// read it before it knows which versions the broker speaks (KIP-511).
//
// The subpackage lifecycle is not about the wire: it holds the goroutine
// group, backoff and context sleep that every package shares, here because
// every layer may import protocol (its package comment says more).
package protocol
