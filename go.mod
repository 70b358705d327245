module github.com/fjordlog/fjord

go 1.26.8

require (
	github.com/klauspost/compress v1.20.1
	github.com/pierrec/lz4/v4 v4.1.30
	github.com/rs/zerolog v1.35.1
	github.com/twmb/franz-go v1.21.7
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.48.0
)

require (
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
)
