// Package sasl is the broker's SASL server side: the JAAS configuration
// Kafka reads its credentials from, and the mechanisms (PLAIN, SCRAM,
// OAUTHBEARER) behind protocol.Authenticator; the node's own client
// identity from the same configuration (ClientMechanism); the SASL side of
// each of a node's listeners (Build); and the SCRAM credentials of the
// metadata image (ImageScram, BootstrapScram). It knows nothing of the
// broker: the broker hands it the sasl.* keys, its listeners and their
// protocols, a func returning the current image, and a logger
// (ListenerConfig).
//
// Files:
//
//   - jaas.go: JAAS configuration (sasl.jaas.config and the file
//     KAFKA_OPTS names), parsed as Kafka's JaasConfig.
//   - server.go: Settings (the sasl.* keys), each listener's mechanisms
//     and login modules, Server (one listener's authenticator), PLAIN.
//   - scram.go: SCRAM-SHA-256 and -512, with librdkafka's nonce rule
//     (scramExchange).
//   - oauth.go, oauth_signed.go, oauth_jwks.go: OAUTHBEARER, unsigned
//     tokens only where a listener's own configuration asks for them
//     (Server.buildOAuth), signed ones checked against a JWKS.
//   - client.go: the node's own identity on a listener (ClientMechanism,
//     SelfMechanism).
//   - listeners.go: Build, the SASL servers of a node's listeners and its
//     identities towards the controllers and the other brokers;
//     ImageScram, SCRAM credentials from the metadata image.
//   - bootstrap.go: fjord.sasl.scram.bootstrap, parsed and created through
//     the active controller (BootstrapScram).
//   - entries.go, 17_sasl_handshake.go, 36_sasl_authenticate.go: the SASL
//     keys' registrations for the node's API registry (broker/api).
package sasl
