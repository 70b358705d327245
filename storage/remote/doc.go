// Package remote is the object store that tiered storage (KIP-405) moves
// sealed segments to: an interface small enough that an S3-compatible
// bucket (package remote/s3) and an in-memory store for tests (MemStore,
// and FaultStore, a wrapper that makes any store fail, stall or damage an
// object on a test's command) both serve it, and that the code deciding what to upload, keep and read
// back never sees which one it has.
//
// The contract is the one S3 gives since 2020 and every store Fjord
// supports keeps: a Put is atomic (a reader sees the whole object or
// none of it, never a prefix), a Get after a successful Put sees it
// (read-after-write), and a Delete of a missing key succeeds. Nothing here
// retries: a caller that retries does so with its own backoff and bound.
//
// Errors are sorted into the kinds an operator acts on differently (the
// sentinels below), so metrics count them by kind and a log line says
// which: a missing object, refused credentials, a missing bucket, or a
// store that cannot be reached.
package remote
