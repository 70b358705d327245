package sasl

import "github.com/fjordlog/fjord/broker/api"

// Entries are the SASL keys' registrations. The exchange itself is the
// connection's (protocol.Server runs it with the listener's Server before
// any other request is read), so these handlers only answer a request
// that arrives outside it: both keys are answered ILLEGAL_SASL_STATE, as
// Kafka answers them then. The CONTROLLER listener serves them locally
// (CtlLocal), advertised only when it authenticates with SASL.
func Entries() []api.Entry { return []api.Entry{handshakeEntry(), authenticateEntry()} }
