package broker

import "encoding/base64"

// encodeUUID renders a 16-byte id the way Kafka prints topic and cluster
// ids: unpadded URL-safe base64.
func encodeUUID(b [16]byte) string { return base64.RawURLEncoding.EncodeToString(b[:]) }
