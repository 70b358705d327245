// Package pwenc encrypts the password-type dynamic broker configs
// (ssl.keystore.password, ssl.key.password, ssl.truststore.password, the
// inline PEM keys and certificates, sasl.jaas.config, and their
// listener.name.<l>. forms) before they are stored in the metadata log,
// with a key derived from password.encoder.secret, as Kafka's
// PasswordEncoder does. The broker that receives an AlterConfigs encrypts
// (Encode); the broker that uses a value decrypts it (Decode); the
// controllers, the metadata log, its snapshots and every node that only
// follows the log see ciphertext.
//
// Files:
//
//   - encoder.go: Settings (the password.encoder.* keys), Encoder, the
//     encoded form and its parser.
//
// The scheme. Each value gets its own random 32-byte salt and 12-byte
// nonce. The key is PBKDF2 of the secret and the salt (HMAC-SHA512 by
// default, Kafka's default key factory, 4096 iterations, 128 bits); the
// value is sealed with AES-GCM. Kafka's default cipher is AES-CBC, which
// does not detect an altered value; GCM does, so a value changed on disk
// or decrypted with the wrong secret is an error, never a wrong password
// handed to a keystore. The header and the config's name are the GCM
// additional data: a value cannot be moved to another key (a truststore
// password into ssl.keystore.password) or have its parameters changed
// without failing to decrypt.
//
// The encoded form is text (config values are strings): Prefix, then the
// standard base64 encoding, without padding, of
//
//	offset  size   field
//	0       1      version, 1
//	1       1      key factory: 1 PBKDF2WithHmacSHA512, 2 PBKDF2WithHmacSHA256,
//	               3 PBKDF2WithHmacSHA1
//	2       4      iterations, big-endian, [MinIterations, MaxIterations]
//	6       1      key length in bytes: 16, 24 or 32 (AES-128, -192, -256)
//	7       32     salt
//	39      12     nonce
//	51      n+16   AES-GCM ciphertext of the n-byte UTF-8 value, then its tag
//
// The parameters are read from the value, not from the settings, so a
// change of password.encoder.iterations or .key.length leaves the stored
// values readable. Another version byte is refused (ErrVersion): a value
// written by a newer Fjord.
//
// Rotation: with password.encoder.old.secret set, Decode tries the
// secret, then the old secret. Values are re-encrypted under the new
// secret only when they are set again.
//
// Nothing here reads a clock or a file: randomness is an io.Reader given
// to New (crypto/rand in the broker).
package pwenc
