module github.com/fjordlog/fjord/cmd/fjord-bench

go 1.26

// kgo is pinned to v1.21.7, the client the broker module uses. kfake is the
// newest pseudo-version that builds against it: kfake at 01f206a7e32c (the
// v1.22.0 tag commit) calls kversion API that only franz-go v1.22.0 has.
//
// aws-sdk-go-v2 (the version the broker module uses) is here for its
// SigV4 signer only: the -tier mode creates its bucket in the weed mini it
// starts with one signed PUT.
require (
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/twmb/franz-go v1.21.7
	github.com/twmb/franz-go/pkg/kadm v1.18.0
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260515175617-8268a5d078c0
	github.com/twmb/franz-go/pkg/kmsg v1.14.0
)

require (
	github.com/aws/smithy-go v1.28.9 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/pierrec/lz4/v4 v4.1.30 // indirect
	golang.org/x/crypto v0.51.0 // indirect
)
