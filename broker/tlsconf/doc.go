// Package tlsconf builds the TLS configuration of a listener from Kafka's
// ssl.* settings: keystores and truststores (PEM, JKS, PKCS12),
// ssl.client.auth, ssl.enabled.protocols, ssl.cipher.suites and
// ssl.principal.mapping.rules, with listener.name.<name>.ssl.* overriding
// the broker-wide keys as Kafka reads them. A Source keeps the current
// configuration and reloads the stores when their files change; Listeners
// are a node's TLS listeners, as the broker serves and dials them. It
// knows nothing of the broker: the broker hands it the ssl.* keys, the
// names of its TLS listeners and a logger (ListenerConfig).
//
// Files:
//
//   - tlsconf.go: Settings (one listener's ssl.* values), the build of a
//     server and client tls.Config from them, Source (the live
//     configuration, Watch, Reconfigure).
//   - stores.go: keystores and truststores in PEM, JKS and PKCS12.
//   - principal.go: a client certificate's distinguished name and
//     ssl.principal.mapping.rules.
//   - listeners.go: Listeners, the node's TLS listeners: loading them at
//     start-up, the server hooks of each, the dialers of this node's own
//     connections to the inter-broker and CONTROLLER listeners, with
//     failing handshakes logged once per change.
//   - dynamic.go: dynamic SSL reconfiguration, as Kafka's: a broker's own
//     dynamic ssl.* keys over its static ones, checked when received
//     (CheckDynamic) and applied when the metadata log holds them
//     (Reconfigure).
package tlsconf
